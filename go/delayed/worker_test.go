package delayed

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Handlers of the worker's tests: package functions (a handler is named by its function's path),
// reporting to package variables each test resets.
var (
	added   counter
	sums    sync.Map // "a+b" -> a+b, as addNumbers computed it
	inside  atomic.Int64
	most    atomic.Int64
	release chan struct{} // closed to let the blocked handlers return
	entered chan string   // each blocked handler says it started
)

func addNumbers(a, b int) int {
	added.add(strconv.Itoa(a) + "+" + strconv.Itoa(b))
	sums.Store(strconv.Itoa(a)+"+"+strconv.Itoa(b), a+b)
	return a + b
}

// blockUntilReleased counts how many of its calls run at once, and returns once release is closed.
func blockUntilReleased(name string) string {
	now := inside.Add(1)
	for seen := most.Load(); now > seen && !most.CompareAndSwap(seen, now); seen = most.Load() {
	}
	entered <- name
	<-release
	inside.Add(-1)
	added.add(name)
	return name
}

func resetHandlers() {
	added = counter{}
	sums = sync.Map{}
	inside.Store(0)
	most.Store(0)
	release = make(chan struct{})
	entered = make(chan string, 100)
}

func TestWorkerRunsAndReleasesEveryTask(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers)
	const n = 500
	for i := 0; i < n; i++ {
		enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, i, 1)))
	}
	stop := runWorker(t, w)
	waitFor(t, "every task to run", func() bool { return added.total() == n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if got := added.get(strconv.Itoa(i) + "+1"); got != 1 {
			t.Errorf("task %d ran %d times", i, got)
		}
	}
	ctx := context.Background()
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d tasks still held after a clean stop", held)
	}
	if done := server.Client.HGet(ctx, q.keys.key("counts"), "done").Val(); done != strconv.Itoa(n) {
		t.Errorf("counts done = %q, want %d", done, n)
	}
	if left := server.Client.LLen(ctx, q.keys.key("noti")).Val(); left != 0 {
		t.Errorf("%d notifications left", left)
	}
	// offline: its keys, description and entry are gone
	for _, id := range w.hold.ids {
		if server.Client.Exists(ctx, id).Val() != 0 {
			t.Fatalf("keep-alive key %s left after a clean stop", id)
		}
	}
	if server.Client.Exists(ctx, q.keys.workerInfo(w.ID())).Val() != 0 {
		t.Error("description left after a clean stop")
	}
	if server.Client.ZCard(ctx, q.keys.key("workers")).Val() != 0 {
		t.Error("worker still listed in the workers set after a clean stop")
	}
}

func TestWorkerOnRedigoPoolRuns(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := NewQueue("jobs", NewRedisPool(server.Addr), DequeueTimeout(100*time.Millisecond))
	w := newTestWorker(t, q, Concurrency(2))
	w.RegisterHandlers(addNumbers)
	for i := 0; i < 50; i++ {
		enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, i, 2)))
	}
	stop := runWorker(t, w)
	waitFor(t, "every task to run", func() bool { return added.total() == 50 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if held := server.Client.HLen(context.Background(), q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d tasks still held", held)
	}
}

func TestConcurrencyRunsThatManyAtOnce(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	const slots = 4
	w := newTestWorker(t, q, Concurrency(slots))
	w.RegisterHandlers(blockUntilReleased)
	for i := 0; i < 2*slots; i++ {
		enqueue(t, q, blob(t, NewGoTaskOfFunc(blockUntilReleased, "task"+strconv.Itoa(i))))
	}
	runWorker(t, w)
	for i := 0; i < slots; i++ {
		select {
		case <-entered:
		case <-time.After(waitDeadline):
			t.Fatalf("only %d tasks started at once, want %d", i, slots)
		}
	}
	if got := inside.Load(); got != slots {
		t.Fatalf("%d tasks run at once, want %d", got, slots)
	}
	close(release)
	waitFor(t, "every task to run", func() bool { return added.total() == 2*slots })
	if got := most.Load(); got != slots {
		t.Errorf("at most %d tasks ran at once, want %d", got, slots)
	}
}

func TestWorkerIsOnlineWithItsDescription(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs", KeepAliveTimeout(30*time.Second))
	w := newTestWorker(t, q, Concurrency(3), Batch(5))
	runWorker(t, w)
	ctx := context.Background()
	if len(w.hold.ids) != 2*(3+5) {
		t.Errorf("%d ids, want 2 x (concurrency + batch) = 16", len(w.hold.ids))
	}
	for i, id := range w.hold.ids {
		want := w.ID()
		if i > 0 {
			want += "-" + strconv.Itoa(i)
		}
		if id != want {
			t.Errorf("id %d is %s, want %s", i, id, want)
		}
		ttl := server.Client.PTTL(ctx, id).Val()
		if ttl <= 0 || ttl > 30*time.Second {
			t.Errorf("keep-alive key %s lives %v, want up to 30 s", id, ttl)
		}
	}
	if !hexWorkerID.MatchString(w.ID()) {
		t.Errorf("worker id %q is not of our form", w.ID())
	}
	about := server.Client.HGetAll(ctx, q.keys.workerInfo(w.ID())).Val()
	host, _ := os.Hostname()
	var queues []string
	if err := json.Unmarshal([]byte(about["queues"]), &queues); err != nil || len(queues) != 1 || queues[0] != "jobs" {
		t.Errorf("description's queues %q, want [\"jobs\"]", about["queues"])
	}
	started, err := strconv.ParseFloat(about["started"], 64)
	if about["host"] != host || about["pid"] != strconv.Itoa(os.Getpid()) || err != nil ||
		time.Since(time.Unix(0, int64(started*1e9))) > waitDeadline {
		t.Errorf("description %v", about)
	}
	if score := server.Client.ZScore(ctx, q.keys.key("workers"), w.ID()).Val(); score < float64(time.Now().Unix()) {
		t.Errorf("workers set lists it lapsing at %v, in the past", score)
	}
}

// hexWorkerID is our worker ids' form (delayed/wire/keys.py's new_worker_id), for a queue without a hash tag.
var hexWorkerID = regexp.MustCompile(`^delayed-py-[0-9a-f]{32}$`)

func TestATaskHeldASecondIsNotedInTheDescriptionUntilReleased(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(blockUntilReleased)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(blockUntilReleased, "long")))
	before := time.Now()
	runWorker(t, w)
	<-entered
	ctx := context.Background()
	var holder, note string
	waitFor(t, "the claim to be noted", func() bool {
		for id := range server.Client.HGetAll(ctx, q.keys.key("processing")).Val() {
			holder = id
		}
		note = server.Client.HGet(ctx, q.keys.workerInfo(w.ID()), holder).Val()
		return note != ""
	})
	claimed, err := strconv.ParseInt(note, 10, 64)
	if err != nil || claimed < before.UnixMilli()-1000 || claimed > time.Now().UnixMilli()+1000 {
		t.Errorf("noted %q for %s: want the ms it claimed its task at", note, holder)
	}
	close(release)
	waitFor(t, "the note to go with the release", func() bool {
		return server.Client.HExists(ctx, q.keys.workerInfo(w.ID()), holder).Val() == false &&
			server.Client.HLen(ctx, q.keys.key("processing")).Val() == 0
	})
}

func TestAWorkerOfAHashTaggedQueueKeepsItsIDsInTheQueuesSlot(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "{orders}")
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 3, 3)))
	runWorker(t, w)
	waitFor(t, "the task", func() bool { return added.total() == 1 })
	for _, id := range w.hold.ids {
		if tag, ok := hashTag(id); !ok || tag != "orders" {
			t.Fatalf("id %s is not in the queue's slot", id)
		}
	}
}
