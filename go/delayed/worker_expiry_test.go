package delayed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var expiryCalls counter

func runsUnlessExpired(name string) {
	expiryCalls.add(name)
}

func failsOnce(name string) error {
	expiryCalls.add(name)
	if expiryCalls.get(name) == 1 {
		return errors.New("fails its first run")
	}
	return nil
}

// longGone is an expiry long passed: a task enqueued with it is expired at its first claim.
var longGone = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func TestAnExpiredTaskIsDeadLetteredUncalledWhateverItNames(t *testing.T) {
	resetHandlers()
	expiryCalls = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(runsUnlessExpired)
	ctx := context.Background()
	for _, task := range []*GoTask{NewGoTaskOfFunc(runsUnlessExpired, "expired"), NewGoTask("main.Unregistered", 1)} {
		if _, err := q.EnqueueContext(ctx, task, ExpiresAt(longGone)); err != nil {
			t.Fatal(err)
		}
	}
	tracked := enqueueTracked(t, q, NewGoTaskOfFunc(runsUnlessExpired, "tracked"), ExpiresAt(longGone), ResultTTL(time.Minute))
	if _, err := q.EnqueueContext(ctx, NewGoTaskOfFunc(runsUnlessExpired, "fresh"), Expires(time.Hour)); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	records, blobs := waitLetters(t, server, q, 3)
	waitFor(t, "the fresh task to run", func() bool { return expiryCalls.get("fresh") == 1 })
	if expiryCalls.total() != 1 {
		t.Errorf("calls %v, want the fresh task's only", expiryCalls.calls)
	}
	wantFuncs := []string{FuncPath(runsUnlessExpired), "main.Unregistered", FuncPath(runsUnlessExpired)}
	for i, letter := range records {
		if letter.Reason != ReasonExpired || letter.Func == nil || *letter.Func != wantFuncs[i] ||
			!strings.HasPrefix(letter.Error, "it expired at 2000-01-01T00:00:00.000+00:00, ") {
			t.Errorf("letter %d: %+v, want reason expired (not not_allowed: the handler is looked up after)", i, letter)
		}
		task, err := DeserializeGoTask(blobs[i])
		if err != nil || task.Options().ExpiresAt == nil || *task.Options().ExpiresAt != float64(longGone.Unix()) {
			t.Errorf("letter %d holds %+v, %v: want the task's blob, its expiry in it", i, task, err)
		}
	}
	waitFor(t, "the tracked record to end dead", func() bool {
		status, err := tracked.Status(ctx)
		return err == nil && status == TaskDead
	})
	if info, err := tracked.Info(ctx); err != nil || !strings.HasPrefix(info.Error, "it expired at 2000-01-01") {
		t.Errorf("the tracked record: %+v, %v", info, err)
	}
}

func TestATaskThatStartedIsNotExpiredByItsRetries(t *testing.T) {
	resetHandlers()
	expiryCalls = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(failsOnce)
	task := NewGoTaskOfFunc(failsOnce, "retried")
	if _, err := q.EnqueueContext(context.Background(), task, Expires(time.Hour), MaxRetries(1), Backoff(time.Hour)); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	var members []goredisZ
	waitFor(t, "the retry to be scheduled", func() bool {
		members = scheduled(t, server, q)
		return len(members) == 1
	})
	retry, err := DeserializeGoTask([]byte(members[0].member[scheduledPrefixBytes:]))
	if err != nil || retry.Options().Attempt != 1 || retry.Options().ExpiresAt != nil {
		t.Errorf("the retry %+v, %v: want attempt 1, and no expiry (it started once)", retry, err)
	}
}
