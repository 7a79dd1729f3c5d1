package delayed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// causes are the context causes cancelled handlers saw, by tag.
var causes sync.Map

// untilCancelled waits for its context to end, notes the cause, and fails: a failure its task's retries
// must not retry once the cancel was requested.
func untilCancelled(ctx context.Context, tag string) error {
	entered <- tag
	<-ctx.Done()
	causes.Store(tag, context.Cause(ctx))
	return errBoom
}

// ignoresCancel returns a value once release is closed, whatever its context says: a result the
// cancelled task's record must not keep.
func ignoresCancel(tag string) string {
	entered <- tag
	<-release
	return tag
}

// subscribers is how many connections listen on q's cancels channel.
func subscribers(t testing.TB, server *testRedis, q *Queue) int64 {
	counts, err := server.Client.PubSubNumSub(context.Background(), q.keys.key("cancels")).Result()
	if err != nil {
		t.Fatal(err)
	}
	return counts[q.keys.key("cancels")]
}

// waitCancelled waits until the task's record ends cancelled, and checks it kept no result.
func waitCancelled(t *testing.T, handle *TaskHandle) *TaskInfo {
	t.Helper()
	var info *TaskInfo
	waitFor(t, "the task to end cancelled", func() bool {
		info, _ = handle.Info(context.Background())
		return info != nil && info.Status == TaskCancelled
	})
	if info.Result != nil || info.CancelRequestedAt.IsZero() || info.Attempts != 1 {
		t.Errorf("a cancelled task's record: %+v", info)
	}
	return info
}

func TestACancelledTasksHandlerHasItsContextCancelledWithErrCancelledAndIsNotRetried(t *testing.T) {
	for _, client := range []string{"redigo", "go-redis"} {
		t.Run(client, func(t *testing.T) {
			resetHandlers()
			server := startRedis(t)
			q := testQueue(t, server, "jobs")
			if client == "redigo" {
				q = NewQueue("jobs", NewRedisPool(server.Addr))
			}
			lines := &logLines{}
			w := newTestWorker(t, q, Logger(lines.logger()))
			w.RegisterHandlers(untilCancelled)
			handle := enqueueTracked(t, q, NewGoTaskOfFunc(untilCancelled, "go"), ResultTTL(time.Minute), MaxRetries(3))
			runWorker(t, w)
			<-entered
			waitFor(t, "the worker to listen", func() bool { return subscribers(t, server, q) == 1 })
			outcome, err := handle.Cancel(context.Background())
			if err != nil || !outcome.Requested || outcome.Worker == "" || !strings.HasPrefix(outcome.Worker, w.ID()) {
				t.Fatalf("cancel: %+v, %v", outcome, err)
			}
			waitCancelled(t, handle)
			if cause, _ := causes.Load("go"); !errors.Is(cause.(error), ErrCancelled) {
				t.Errorf("the handler's context's cause: %v, want ErrCancelled", cause)
			}
			lines.waitLog(t, "task cancelled")
			ctx := context.Background()
			if n := server.Client.ZCard(ctx, q.keys.key("scheduled")).Val() + server.Client.LLen(ctx, "jobs").Val() +
				server.Client.XLen(ctx, q.keys.key("dead_letters")).Val(); n != 0 {
				t.Errorf("%d retries or dead letters of a cancelled task", n)
			}
			if counts := server.Client.HGetAll(ctx, q.keys.key("counts")).Val(); counts["retried"] != "" ||
				counts["done"] != "" || counts["dead"] != "" {
				t.Errorf("counts %v: a cancelled task counts in neither done, retried nor dead", counts)
			}
			if strings.Contains(lines.String(), "level=ERROR") {
				t.Errorf("an ERROR line for a cancelled task:\n%s", lines)
			}
		})
	}
}

func TestAHandlerThatIgnoresItsCancelEndsCancelledWithoutItsResult(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(ignoresCancel)
	handle := enqueueTracked(t, q, NewGoTaskOfFunc(ignoresCancel, "stubborn"), ResultTTL(time.Minute))
	runWorker(t, w)
	<-entered
	waitFor(t, "the worker to listen", func() bool { return subscribers(t, server, q) == 1 })
	if outcome, err := handle.Cancel(context.Background()); err != nil || !outcome.Requested {
		t.Fatalf("cancel: %+v, %v", outcome, err)
	}
	close(release)
	waitCancelled(t, handle)
	var failed *TaskFailedError
	if _, err := handle.Result(context.Background()); !errors.As(err, &failed) || failed.Info.Status != TaskCancelled {
		t.Errorf("result: %v", err)
	}
}

func TestTheListenerSubscribesAgainAfterItsConnectionIsKilled(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	lines := &logLines{}
	w := newTestWorker(t, q, Logger(lines.logger()))
	w.RegisterHandlers(untilCancelled)
	handle := enqueueTracked(t, q, NewGoTaskOfFunc(untilCancelled, "again"), ResultTTL(time.Minute))
	runWorker(t, w)
	<-entered
	ctx := context.Background()
	waitFor(t, "the worker to listen", func() bool { return subscribers(t, server, q) == 1 })
	if err := server.Client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	// once its own subscription is confirmed (go-redis's PubSub subscribes again by itself as it reports
	// the error, on a connection the listener then closes: a subscriber count can be that one's)
	lines.waitLog(t, "Redis is back")
	if outcome, err := handle.Cancel(ctx); err != nil || !outcome.Requested {
		t.Fatalf("cancel: %+v, %v", outcome, err)
	}
	waitCancelled(t, handle)
}

func TestATaskWhoseCancelWasHeardBeforeItStartedIsNotCalled(t *testing.T) {
	c := newCancels()
	c.hear("heard")
	if c.starting("heard", func(error) { t.Error("cancelled a call that was never made") }) {
		t.Error("a call whose cancel was heard before it started may start")
	}
	var cause error
	if !c.starting("running", func(err error) { cause = err }) {
		t.Fatal("a call whose cancel was not heard may not start")
	}
	c.hear("running")
	if !errors.Is(cause, ErrCancelled) {
		t.Errorf("a running call's cancel: %v, want ErrCancelled", cause)
	}
	for i := 0; i < rememberedCancels; i++ {
		c.hear(fmt.Sprint("other", i))
	}
	if len(c.heard) != rememberedCancels || c.heard["heard"] {
		t.Errorf("%d heard ids kept, the oldest among them: %v", len(c.heard), c.heard["heard"])
	}
}
