package delayed

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits per key on the Go worker (limits.go), against a real redis-server: admitted at a task's start
// by admit.lua, the same script and keys as Python's workers (tests/test_limits.py covers the script's
// every path); counted, never timed.

// startedAt records when each of its calls started (Redis's clock is this host's: the tests' server is local).
var startedAt sync.Map // name -> unix seconds

func nowSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func stampStart(name string) {
	startedAt.Store(name, nowSeconds())
	added.add(name)
}

// limitTask is a GoTask of handler with its arguments and options.
func limitTask(t testing.TB, handler any, arg string, options ...TaskOption) []byte {
	return blob(t, NewGoTaskOfFunc(handler, arg).With(options...))
}

func TestAConcurrencyLimitRunsThatManyAtOnceAcrossWorkersAndHoldsTheRestOutOfTheQueue(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	for i := 0; i < 6; i++ {
		enqueue(t, q, limitTask(t, blockUntilReleased, "task"+strconv.Itoa(i), ConcurrencyLimit(2)))
	}
	for range 2 {
		w := newTestWorker(t, q, Concurrency(4))
		w.RegisterHandlers(blockUntilReleased)
		runWorker(t, w)
	}
	waiting := q.keys.limitKeys(FuncPath(blockUntilReleased))[1].(string)
	waitFor(t, "four tasks held back for a slot", func() bool { return server.Client.LLen(context.Background(), waiting).Val() == 4 })
	if running := inside.Load(); running != 2 || server.Client.LLen(context.Background(), "jobs").Val() != 0 {
		t.Fatalf("%d tasks run, want 2; the held ones are out of the queue", running)
	}
	close(release)
	waitFor(t, "every task to run", func() bool { return added.total() == 6 })
	if got := most.Load(); got != 2 {
		t.Errorf("at most %d tasks ran at once, want 2", got)
	}
	waitFor(t, "every slot freed", func() bool {
		return server.Client.Exists(context.Background(), q.keys.key("limit_holders"), waiting).Val() == 0
	})
}

func TestARateLimitStartsAtMostNPerPeriodAndHoldsEachTaskOnce(t *testing.T) {
	resetHandlers()
	startedAt = sync.Map{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	lines := &logLines{}
	registry := prometheus.NewRegistry()
	w := newTestWorker(t, q, Concurrency(2), Logger(lines.logger()), Metrics(registry))
	w.RegisterHandlers(stampStart)
	enqueued := nowSeconds()
	const n, total = 2, 8
	for i := 0; i < total; i++ {
		enqueue(t, q, limitTask(t, stampStart, "t"+strconv.Itoa(i), RateLimit(strconv.Itoa(n)+"/s")))
	}
	runWorker(t, w)
	waitFor(t, "every task to run", func() bool { return added.total() == total })
	var starts []float64
	startedAt.Range(func(_, at any) bool { starts = append(starts, at.(float64)); return true })
	for k := 1; k <= total/n; k++ { // a task starts after its admission, which is after the enqueue
		early := 0
		for _, at := range starts {
			if at <= enqueued+float64(k) {
				early++
			}
		}
		if early > k*n {
			t.Errorf("%d tasks started within %d s of the enqueue, at most %d may", early, k, k*n)
		}
	}
	held := strings.Count(lines.String(), "task held back by its limits")
	got := counted(t, registry)
	if held == 0 || held > total-n || got["held|"+FuncPath(stampStart)] != float64(held) || got["done|"+FuncPath(stampStart)] != total {
		t.Errorf("%d holds logged (each task held once at most, %d at most), metrics %v", held, total-n, got)
	}
	if got["runs"] != total {
		t.Errorf("%v runs timed, want %d: a held task did not run", got["runs"], total)
	}
}

func TestATaskHeldByAnotherWorkersSlotNeverBlocksAnUnlimitedOneAndRunsOnceItFrees(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	// another worker (Python's, say: the same script) holds the key's one slot
	other := newHolding(q, 1)
	enqueue(t, q, limitTask(t, addNumbers, "elsewhere", ConcurrencyLimit(1), LimitKey("k")))
	server.Client.Set(ctx, other.ids[0], 1, 0)
	claims, _, err := other.claim(ctx, 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v, %v", claims, err)
	}
	if admission, _, err := other.admit(ctx, claims[0], &taskLimit{key: "k", slots: 1}, ""); err != nil || admission != admitted {
		t.Fatalf("admit: %q, %v", admission, err)
	}
	for i := 0; i < 20; i++ {
		enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, i, 0).With(ConcurrencyLimit(1), LimitKey("k"))))
	}
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 100, 0)))
	w := newTestWorker(t, q, Concurrency(1))
	w.RegisterHandlers(addNumbers)
	runWorker(t, w)
	waitFor(t, "the unlimited task", func() bool { return added.get("100+0") == 1 })
	if total, waiting := added.total(), server.Client.LLen(ctx, q.keys.limitKeys("k")[1].(string)).Val(); total != 1 || waiting != 20 {
		t.Fatalf("%d tasks ran, %d held back: want 1 and 20", total, waiting)
	}
	other.release(claims[0], nil, nil)
	if _, _, err := other.claim(ctx, 0); err != nil { // the release frees the slot, and wakes the first held task
		t.Fatal(err)
	}
	waitFor(t, "the held tasks, one at a time", func() bool { return added.total() == 21 })
	waitFor(t, "the last slot freed", func() bool {
		return server.Client.Exists(ctx, q.keys.key("limit_holders")).Val() == 0
	})
}

func TestTheLimitKeyDefaultsToTheGoName(t *testing.T) {
	task := NewGoTaskOfFunc(addNumbers, 1, 2).With(RateLimit("100/m"), ConcurrencyLimit(5))
	got := limitOf(task.Options(), task.FuncPath())
	if *got != (taskLimit{key: FuncPath(addNumbers), rate: "100/m", rateCount: 100, periodMS: 60000, slots: 5}) {
		t.Errorf("%+v", got)
	}
	if limitOf(NewGoTaskOfFunc(addNumbers, 1, 2).With(MaxRetries(3)).Options(), "x") != nil {
		t.Error("a task without limits has none")
	}
	if limitOf(task.With(LimitKey("customer 42")).Options(), "x").key != "customer 42" {
		t.Error("a limit key of its own")
	}
}
