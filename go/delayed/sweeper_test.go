package delayed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ourDeadWorker is an id of ours whose keep-alive key does not exist: a worker that died.
const ourDeadWorker = "delayed-py-00000000000000000000000000000001"

// holdAs makes worker hold blob in queue, as a claim would have.
func holdAs(t *testing.T, server *testRedis, queue string, worker string, blob []byte) {
	t.Helper()
	if err := server.Client.HSet(context.Background(), queue+processingKeySuffix, worker, blob).Err(); err != nil {
		t.Fatal(err)
	}
}

// withCrashes is task's blob with crashes counted in it.
func withCrashes(t *testing.T, task Task, crashes int) []byte {
	t.Helper()
	o := optionsOf(task)
	o.Crashes = crashes
	blob, _ := task.Serialize()
	counted, err := blobWithOptions(blob, o)
	if err != nil {
		t.Fatal(err)
	}
	return counted
}

func TestRequeueLostCountsACrashInTheTasksOurDeadWorkersHeld(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueue("q", NewRedisPool(server.Addr))
	tracked := trackedTask(t, queue)
	claimAs(t, queue, ourDeadWorker)
	goTask := NewGoTask("main.Add", 1, 2)
	goBlob, _ := goTask.Serialize()
	holdAs(t, server, "q", "delayed-py-00000000000000000000000000000002-1", goBlob)
	holdAs(t, server, "q", "delayed-py-00000000000000000000000000000003", withCrashes(t, goTask, 2))
	const alive = "delayed-py-00000000000000000000000000000004"
	server.Client.Set(ctx, alive, 1, time.Hour)
	holdAs(t, server, "q", alive, goBlob)

	count, err := queue.RequeueLost()
	if err != nil || count != 3 {
		t.Fatalf("RequeueLost %d, %v", count, err)
	}
	crashes := map[string]int{}
	for _, blob := range server.Client.LRange(ctx, "q", 0, -1).Val() {
		task, err := decodeTask([]byte(blob))
		if err != nil {
			t.Fatal(err)
		}
		crashes[task.getFuncPath()] += optionsOf(task).Crashes
		if o := optionsOf(task); o.ID != "" && (o.ID != tracked.ID() || !strings.HasSuffix(blob, trackedTail+tracked.ID())) {
			t.Fatalf("the tracked task came back as %x", blob)
		}
	}
	if crashes["tasks:add"] != 1 || crashes["main.Add"] != 1+3 || server.Client.LLen(ctx, "q_noti").Val() != 3 {
		t.Fatalf("crashes %v", crashes)
	}
	if held := server.Client.HKeys(ctx, "q_processing").Val(); len(held) != 1 || held[0] != alive {
		t.Fatalf("still held by %q", held)
	}
	if status, err := tracked.Status(ctx); status != TaskPending || err != nil {
		t.Fatalf("the tracked task is %s (%v)", status, err)
	}
}

func TestRequeueLostRequeuesAGoDelayedWorkersTaskAsItIs(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	blob, _ := NewGoTask("main.Add", 1, 2).Serialize()
	holdAs(t, server, "q", "0123456789abcdef0123456789abcdef", blob)
	if count, err := queue.RequeueLost(); count != 1 || err != nil {
		t.Fatalf("RequeueLost %d, %v", count, err)
	}
	if blobs := server.Client.LRange(ctx, "q", 0, -1).Val(); len(blobs) != 1 || blobs[0] != string(blob) {
		t.Fatalf("queue %x", blobs)
	}
}

func TestRequeueLostDeadLettersACrashLoopAndEndsItsRecord(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	handle, err := queue.EnqueueContext(ctx, NewGoTask("main.Crash"), ResultTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	blob := server.Client.LPop(ctx, "q").Val()
	server.Client.Del(ctx, "q_noti")
	task, _ := decodeTask([]byte(blob))
	looping := withCrashes(t, task, DefaultMaxCrashes)
	holdAs(t, server, "q", ourDeadWorker, looping)
	holdAs(t, server, "q", "delayed-py-00000000000000000000000000000002", []byte("\x92\xa1f")) // no task: [f, <nothing>]
	if count, err := queue.RequeueLost(); count != 0 || err != nil {
		t.Fatalf("RequeueLost %d, %v", count, err)
	}
	letters := server.Client.XRange(ctx, "q_dead_letters", "-", "+").Val()
	if len(letters) != 2 {
		t.Fatalf("%d dead letters", len(letters))
	}
	var record map[string]any
	if err := json.Unmarshal([]byte(letters[0].Values["record"].(string)), &record); err != nil {
		t.Fatal(err)
	}
	failedAt, _ := record["failed_at"].(string)
	if record["reason"] != ReasonCrashLoop || record["func"] != "main.Crash" || record["queue"] != "q" ||
		record["worker"] != ourDeadWorker || record["error"] != "its worker died while holding it 4 times (the limit is 3)" ||
		letters[0].Values["task"] != string(looping) || !strings.HasSuffix(failedAt, "+00:00") {
		t.Fatalf("letter %v", letters[0].Values)
	}
	if !strings.Contains(letters[1].Values["record"].(string), `"reason":"malformed"`) {
		t.Fatalf("letter %v", letters[1].Values)
	}
	_, err = handle.Result(ctx)
	var failed *TaskFailedError
	if !errors.As(err, &failed) || failed.Info.Status != TaskDead || failed.Info.Error != "its workers died running it 4 times" ||
		failed.Info.Letter != letters[0].ID {
		t.Fatalf("result: %v", err)
	}
	if held := server.Client.HLen(ctx, "q_processing").Val(); held != 0 || server.Client.HGet(ctx, "q_counts", "dead").Val() != "2" {
		t.Fatalf("%d still held", held)
	}
}

func TestAMaxCrashesOfZeroCountsNoCrash(t *testing.T) {
	server := startRedis(t)
	queue := NewQueueWithClient("q", server.Client)
	blob := withCrashes(t, NewGoTask("main.Crash"), 5)
	holdAs(t, server, "q", ourDeadWorker, blob)
	if swept, err := queue.sweep(context.Background(), 0); swept.notified != 1 || len(swept.crashLoops) != 0 || err != nil {
		t.Fatalf("sweep %+v, %v", swept, err)
	}
	if blobs := server.Client.LRange(context.Background(), "q", 0, -1).Val(); len(blobs) != 1 || blobs[0] != string(blob) {
		t.Fatalf("queue %x", blobs)
	}
}

func TestRequeueLostTopsUpMissingNotificationsOnceTheHeadStoodStill(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	server.Client.RPush(ctx, "q", "a", "b")
	server.Client.RPush(ctx, "q_noti", "1")
	if count, err := queue.RequeueLost(); count != 0 || err != nil {
		t.Fatalf("topped up at once: %d, %v", count, err)
	}
	waitFor(t, "a sweep to top up the notification", func() bool {
		count, err := queue.RequeueLost()
		return count == 1 && err == nil
	})
	if n := server.Client.LLen(ctx, "q_noti").Val(); n != 2 {
		t.Fatalf("%d notifications", n)
	}
}

// syncBuffer is a log destination a sweeper's goroutine writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestASweeperRecoversLostTasksMovesDueOnesAndStops(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	blob, _ := NewGoTask("main.Add", 1, 2).Serialize()
	holdAs(t, server, "q", "0123456789abcdef0123456789abcdef", blob)
	holdAs(t, server, "q", ourDeadWorker, withCrashes(t, NewGoTask("main.Crash"), 1))
	server.Client.ZAdd(ctx, "q_scheduled", goredis.Z{Score: 1, Member: scheduledMember(scheduledDelayed, "due")})

	sweeper := NewSweeper(queue)
	sweeper.SetInterval(time.Hour)
	sweeper.SetMaxCrashes(1)
	var logged syncBuffer
	sweeper.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	stopped := make(chan struct{})
	go func() {
		sweeper.Run()
		close(stopped)
	}()
	waitFor(t, "the lost task and the due one in the queue", func() bool {
		return server.Client.LLen(ctx, "q").Val() == 2 && server.Client.XLen(ctx, "q_dead_letters").Val() == 1
	})
	if swept := server.Client.Get(ctx, "q_swept").Val(); !strings.HasSuffix(swept, ":3600000") {
		t.Fatalf("the sweep was not claimed: %q", swept)
	}
	waitFor(t, "the crash loop's warning", func() bool {
		return strings.Contains(logged.String(), `level=WARN msg="dead-lettered a crash loop" queue=q func=main.Crash crashes=2 max_crashes=1`)
	})
	server.Client.ZAdd(ctx, "q_scheduled", goredis.Z{Score: 2, Member: scheduledMember(scheduledDelayed, "later")})
	waitFor(t, "a due task moved between sweeps", func() bool { return server.Client.LLen(ctx, "q").Val() == 3 })
	sweeper.Stop()
	<-stopped
}

func TestRequeueLostOnAClusterDeclaresOnlyTheQueuesSlot(t *testing.T) {
	cluster := startCluster(t)
	ctx := context.Background()
	for _, key := range []string{"{orders}", "orders", "delayed-py-0a:{orders}", "0123456789abcdef0123456789abcdef", ""} {
		if want := cluster.nodes[0].Client.ClusterKeySlot(ctx, key).Val(); int64(keySlot(key)) != want {
			t.Errorf("slot of %q: %d, Redis says %d", key, keySlot(key), want)
		}
	}
	client, err := Connect(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	queue := NewQueueWithClient("{orders}", client)
	node := cluster.primaryFor(t, "{orders}")
	blob, _ := NewGoTask("main.Add", 1, 2).Serialize()
	ours := ourDeadWorker + queue.keys.workerIDSuffix()
	holdAs(t, node, "{orders}", ours, blob)
	holdAs(t, node, "{orders}", "0123456789abcdef0123456789abcdef", blob) // go-delayed's id: another slot
	if count, err := queue.RequeueLost(); count != 1 || err != nil {
		t.Fatalf("RequeueLost %d, %v", count, err)
	}
	if held := node.Client.HKeys(ctx, "{orders}_processing").Val(); len(held) != 1 || held[0] == ours {
		t.Fatalf("still held by %q", held)
	}
}
