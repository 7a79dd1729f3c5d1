package delayed

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// queuesOn are queues named name on server, one through each kind of client a Queue takes: go-delayed's
// redigo pool and a go-redis client.
func queuesOn(server *testRedis, name string) map[string]*Queue {
	return map[string]*Queue{
		"redigo":  NewQueue(name, NewRedisPool(server.Addr)),
		"goredis": NewQueueWithClient(name, server.Client),
	}
}

// queued is what the queue holds: its blobs, its notifications and its "enqueued" count.
func queued(t *testing.T, server *testRedis, name string) (blobs []string, notifications int64, enqueued string) {
	t.Helper()
	ctx := context.Background()
	blobs = server.Client.LRange(ctx, name, 0, -1).Val()
	notifications = server.Client.LLen(ctx, name+notiKeySuffix).Val()
	enqueued = server.Client.HGet(ctx, name+countsSuffix, "enqueued").Val()
	return
}

func TestEnqueueWritesTheBlobAndItsNotificationAndCountsIt(t *testing.T) {
	server := startRedis(t)
	for kind, queue := range queuesOn(server, "q-"+t.Name()) {
		t.Run(kind, func(t *testing.T) {
			task := NewGoTask("main.Add", 1, 2)
			if err := queue.Enqueue(task); err != nil {
				t.Fatal(err)
			}
			want, _ := task.Serialize()
			blobs, notifications, enqueued := queued(t, server, queue.Name())
			if len(blobs) != 1 || blobs[0] != string(want) || notifications != 1 || enqueued != "1" {
				t.Fatalf("queue %q, %d notifications, enqueued %q", blobs, notifications, enqueued)
			}
			if n, err := queue.Len(); n != 1 || err != nil {
				t.Fatalf("Len %d, %v", n, err)
			}
			server.Client.FlushAll(context.Background())
		})
	}
}

func TestEnqueueContextWithoutTrackingGivesNoHandle(t *testing.T) {
	server := startRedis(t)
	queue := NewQueueWithClient("q", server.Client)
	handle, err := queue.EnqueueContext(context.Background(), NewPyTask("tasks:add", []int{1, 2}, nil))
	if handle != nil || err != nil {
		t.Fatalf("handle %v, %v", handle, err)
	}
}

func TestOptionsGivenToEnqueueWinOverTheTasks(t *testing.T) {
	server := startRedis(t)
	queue := NewQueueWithClient("q", server.Client)
	task := NewGoTask("main.Add", 1, 2).With(MaxRetries(1), TimeLimit(time.Minute))
	if _, err := queue.EnqueueContext(context.Background(), task, MaxRetries(5)); err != nil {
		t.Fatal(err)
	}
	blobs, _, _ := queued(t, server, "q")
	decoded, err := DeserializeGoTask([]byte(blobs[0]))
	if err != nil {
		t.Fatal(err)
	}
	o := decoded.Options()
	if *o.MaxRetries != 5 || *o.TimeLimit != 60 || decoded.FuncPath() != "main.Add" {
		t.Fatalf("options %+v", o)
	}
}

func TestDelayAndAtScheduleTheTaskAsPythonsProducerDoes(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	for kind, queue := range queuesOn(server, "q") {
		t.Run(kind, func(t *testing.T) {
			defer server.Client.FlushAll(ctx)
			task := NewPyTask("tasks:add", []int{1, 2}, nil)
			blob, _ := task.Serialize()
			before := time.Now()
			if _, err := queue.EnqueueContext(ctx, task, Delay(time.Hour)); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			at := time.Unix(before.Unix()+7200, 500_000_000)
			if _, err := queue.EnqueueContext(ctx, task, At(at)); err != nil {
				t.Fatal(err)
			}
			members := server.Client.ZRangeWithScores(ctx, "q"+scheduledSuffix, 0, -1).Val()
			if len(members) != 2 {
				t.Fatalf("scheduled %v", members)
			}
			delayed, scheduled := members[0], members[1]
			score := func(when time.Time) float64 { return float64(when.UnixNano()) / 1e9 }
			if delayed.Score < score(before.Add(time.Hour)) || delayed.Score > score(after.Add(time.Hour)) || scheduled.Score != score(at) {
				t.Fatalf("due at %f and %f", delayed.Score, scheduled.Score)
			}
			for _, member := range members {
				text := member.Member.(string)
				if len(text) != scheduledPrefixBytes+len(blob) || text[0] != 'd' || text[scheduledPrefixBytes:] != string(blob) {
					t.Fatalf("member %q: not a delayed nonce then the blob", text)
				}
			}
			if blobs, notifications, enqueued := queued(t, server, "q"); len(blobs) != 0 || notifications != 0 || enqueued != "2" {
				t.Fatalf("queue %q, %d notifications, enqueued %q", blobs, notifications, enqueued)
			}
			if _, err := queue.EnqueueContext(ctx, task, At(before.Add(-time.Second))); err != nil {
				t.Fatal(err)
			}
			if blobs, _, _ := queued(t, server, "q"); len(blobs) != 1 {
				t.Fatalf("a task due in the past is enqueued now: %q", blobs)
			}
		})
	}
}

func TestResultTTLTracksTheTaskWithARecordAndAHandle(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	for _, task := range []Task{NewGoTask("main.Add", 1, 2), NewPyTask("tasks:add", []int{1, 2}, nil)} {
		handle, err := queue.EnqueueContext(ctx, task, ResultTTL(90500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if handle == nil || !hexID.MatchString(handle.ID()) {
			t.Fatalf("handle %v", handle)
		}
		blobs, _, _ := queued(t, server, "q")
		blob := blobs[len(blobs)-1]
		if !strings.HasSuffix(blob, trackedTail+handle.ID()) {
			t.Fatalf("blob %x does not end with its id", blob)
		}
		record := server.Client.HGetAll(ctx, "q_task:"+handle.ID()).Val()
		if record["status"] != "pending" || record["func"] != task.getFuncPath() || record["ttl"] != "91" ||
			record["blob"] != blob || record["enqueued"] == "" {
			t.Fatalf("record %q", record)
		}
		if server.Client.Get(ctx, "q_tracked").Val() != "1" {
			t.Fatal("no tracked marker")
		}
	}
	handle, err := queue.EnqueueContext(ctx, NewGoTask("main.Add", 1, 2), ResultTTL(time.Minute), Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	record := server.Client.HGetAll(ctx, "q_task:"+handle.ID()).Val()
	member := server.Client.ZRange(ctx, "q_scheduled", 0, -1).Val()
	if record["status"] != "scheduled" || record["due"] == "" || len(member) != 1 || record["nonce"] != member[0][:8] {
		t.Fatalf("record %q, scheduled %q", record, member)
	}
}

func TestUniqueForTakesALockAndRefusesTheDuplicate(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	for _, task := range []Task{NewGoTask("main.Add", 1, 2), NewPyTask("tasks:add", []int{1, 2}, nil)} {
		blob, _ := task.Serialize()
		digest, _ := uniqueDigest(blob)
		if _, err := queue.EnqueueContext(ctx, task, UniqueFor(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		lock := "q_unique:" + digest
		token := server.Client.Get(ctx, lock).Val()
		ttl := server.Client.PTTL(ctx, lock).Val()
		blobs, _, _ := queued(t, server, "q")
		held, err := decodeTask([]byte(blobs[len(blobs)-1]))
		if err != nil {
			t.Fatal(err)
		}
		o := optionsOf(held)
		if len(token) != 16 || o.UniqueToken != token || o.UniqueKey != digest || ttl <= 0 || ttl > 10*time.Second {
			t.Fatalf("lock %s holds %q for %v; the task carries %+v", lock, token, ttl, o)
		}
		_, err = queue.EnqueueContext(ctx, task, UniqueFor(10*time.Second))
		if !errors.Is(err, ErrDuplicateTask) || !strings.Contains(err.Error(), lock) {
			t.Fatalf("a duplicate enqueued: %v", err)
		}
	}
	if blobs, notifications, enqueued := queued(t, server, "q"); len(blobs) != 2 || notifications != 2 || enqueued != "2" {
		t.Fatalf("queue %d tasks, %d notifications, enqueued %q", len(blobs), notifications, enqueued)
	}
}

func TestUniqueKeyNamesTheLockWhateverTheCall(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	handle, err := queue.EnqueueContext(ctx, NewGoTask("main.Report", "2026-11"),
		UniqueFor(time.Hour), UniqueKey("report:2026-11"), ResultTTL(time.Minute), Delay(time.Minute))
	if err != nil || handle == nil {
		t.Fatalf("handle %v, %v", handle, err)
	}
	if server.Client.Exists(ctx, "q_unique:report:2026-11").Val() != 1 {
		t.Fatal("no lock named by the key")
	}
	if record := server.Client.HGetAll(ctx, "q_task:"+handle.ID()).Val(); record["status"] != "scheduled" {
		t.Fatalf("record %q", record)
	}
	_, err = queue.EnqueueContext(ctx, NewPyTask("tasks:other", nil, nil), UniqueFor(time.Hour), UniqueKey("report:2026-11"))
	if !errors.Is(err, ErrDuplicateTask) {
		t.Fatalf("another call with the same key enqueued: %v", err)
	}
	if _, err := queue.EnqueueContext(ctx, NewPyTask("tasks:other", nil, nil), UniqueKey("k")); err == nil {
		t.Fatal("UniqueKey without UniqueFor enqueued")
	}
}

func TestATaskOverOneMebibyteIsRefused(t *testing.T) {
	server := startRedis(t)
	queue := NewQueueWithClient("q", server.Client)
	err := queue.Enqueue(NewGoTask("main.F", strings.Repeat("x", maxTaskSize)))
	if !errors.Is(err, ErrTaskTooLarge) {
		t.Fatalf("enqueued: %v", err)
	}
	if blobs, _, enqueued := queued(t, server, "q"); len(blobs) != 0 || enqueued != "" {
		t.Fatal("something was written")
	}
}

func TestDueTimeIsNowForATimeAlreadyPast(t *testing.T) {
	now := time.Unix(1000, 0)
	hour := 3600.0
	cases := map[string]TaskOptions{
		"":        {},
		"4600":    {Delay: &hour},
		"1000.25": {At: now.Add(250 * time.Millisecond)},
	}
	for want, o := range cases {
		if got := dueTime(o, now); got != want {
			t.Errorf("%+v: due %q, want %q", o, got, want)
		}
	}
	if got := dueTime(TaskOptions{At: now}, now); got != "" {
		t.Errorf("due now: %q", got)
	}
	if _, err := strconv.ParseFloat(dueTime(TaskOptions{Delay: &hour}, time.Now()), 64); err != nil {
		t.Error(err)
	}
}
