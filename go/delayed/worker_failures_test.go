package delayed

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

var failures counter

func failAlways(name string) error {
	failures.add(name)
	return fmt.Errorf("%s broke:\n  badly", name)
}

func panicAlways(name string) int {
	failures.add(name)
	panic("no " + name)
}

func waitForDeadline(ctx context.Context) error {
	failures.add("waited")
	<-ctx.Done()
	return ctx.Err()
}

// ignoreDeadline runs past its time limit, whatever its context says, until release is closed.
func ignoreDeadline() {
	failures.add("ignored")
	<-release
	failures.add("returned")
}

func TestEachRefusalIsADeadLetterWithItsReason(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers)
	unknown := blob(t, NewGoTask("main.Unregistered", 1))
	badArguments := blob(t, NewGoTaskOfFunc(addNumbers, "one", "two"))
	pyTask := blob(t, NewPyTask("tasks:add", []int{1, 2}, nil))
	malformed := []byte("not msgpack \xc1")
	tooLarge := blob(t, NewGoTaskOfFunc(addNumbers, strings.Repeat("x", maxTaskSize), 1))
	enqueue(t, q, unknown, badArguments, pyTask, malformed, tooLarge)
	runWorker(t, w)
	records, blobs := waitLetters(t, server, q, 5)
	want := []struct {
		reason, error, funcPath string
	}{
		{ReasonNotAllowed, "no handler is registered for main.Unregistered", "main.Unregistered"},
		{ReasonBadArguments, "delayed.addNumbers(int, int) does not take the task's arguments", FuncPath(addNumbers)},
		{ReasonPyTask, "a PyTask for 'tasks:add': only a Python worker can run it", "tasks:add"},
		{ReasonMalformed, "not a task", ""},
		{ReasonTooLarge, strconv.Itoa(len(tooLarge)) + " bytes, over 1048576", ""},
	}
	for i, letter := range records {
		if letter.Reason != want[i].reason || !strings.Contains(letter.Error, want[i].error) {
			t.Errorf("letter %d: %s %q, want %s %q", i, letter.Reason, letter.Error, want[i].reason, want[i].error)
		}
		if (letter.Func == nil) != (want[i].funcPath == "") || (letter.Func != nil && *letter.Func != want[i].funcPath) {
			t.Errorf("letter %d: func %v, want %q", i, letter.Func, want[i].funcPath)
		}
		if letter.Queue != "jobs" || letter.Worker == nil || *letter.Worker != w.ID() || letter.Traceback != nil {
			t.Errorf("letter %d: %+v", i, letter)
		}
		failedAt, err := time.Parse("2006-01-02T15:04:05.000-07:00", letter.FailedAt)
		if err != nil || time.Since(failedAt) > waitDeadline || !strings.HasSuffix(letter.FailedAt, "+00:00") {
			t.Errorf("letter %d: failed_at %q (%v)", i, letter.FailedAt, err)
		}
	}
	for i, data := range [][]byte{unknown, badArguments, pyTask, malformed, tooLarge} {
		if string(blobs[i]) != string(data) {
			t.Errorf("letter %d holds %d bytes, want the task's blob of %d", i, len(blobs[i]), len(data))
		}
	}
	ctx := context.Background()
	if dead := server.Client.HGet(ctx, q.keys.key("counts"), "dead").Val(); dead != "5" {
		t.Errorf("counts dead = %q, want 5", dead)
	}
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d dead-lettered tasks still held", held)
	}
	if added.total() != 0 {
		t.Error("a refused task ran")
	}
}

func TestAFailureWithoutRetriesIsADeadLetterWithItsError(t *testing.T) {
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	logs := &logLines{}
	w := newTestWorker(t, q, Logger(logs.logger()))
	w.RegisterHandlers(failAlways, panicAlways)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(failAlways, "plain")), blob(t, NewGoTaskOfFunc(panicAlways, "luck")))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 2)
	failed, panicked := records[0], records[1]
	if failed.Reason != ReasonFailed || failed.Error != "plain broke: badly" || *failed.Func != FuncPath(failAlways) ||
		failed.Traceback != nil {
		t.Errorf("the error's letter: %+v", failed)
	}
	if panicked.Reason != ReasonFailed || panicked.Error != "panic: no luck" || panicked.Traceback == nil ||
		!strings.Contains(*panicked.Traceback, "delayed.panicAlways") || !strings.HasPrefix(*panicked.Traceback, "panic: no luck\n") {
		t.Errorf("the panic's letter: %+v", panicked)
	}
	if failures.get("plain") != 1 || failures.get("luck") != 1 {
		t.Errorf("calls: %v, want one each (no retries)", failures.calls)
	}
	logs.waitLog(t, `msg="task dead-lettered" func=`+FuncPath(failAlways)+` task=- queue=jobs reason=failed`)
}

func TestAFailureIsRetriedWithBackoffThenDeadLettered(t *testing.T) {
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(failAlways)
	task := NewGoTaskOfFunc(failAlways, "retried").With(MaxRetries(2), Backoff(0))
	enqueue(t, q, blob(t, task))
	runWorker(t, w)
	records, blobs := waitLetters(t, server, q, 1)
	if failures.get("retried") != 3 {
		t.Errorf("ran %d times, want 3 (1 + max_retries 2)", failures.get("retried"))
	}
	if records[0].Reason != ReasonFailed || records[0].Error != "retried broke: badly" {
		t.Errorf("letter %+v", records[0])
	}
	last, err := DeserializeGoTask(blobs[0])
	if err != nil || last.Options().Attempt != 2 || *last.Options().MaxRetries != 2 || string(last.Payload()) != string(task.Payload()) {
		t.Errorf("the letter's task: %+v, %v; want the task at attempt 2", last, err)
	}
	ctx := context.Background()
	counts := server.Client.HGetAll(ctx, q.keys.key("counts")).Val()
	if counts["retried"] != "2" || counts["dead"] != "1" {
		t.Errorf("counts %v, want retried 2, dead 1", counts)
	}
}

func TestARetryWaitsItsBackoffInTheScheduledSet(t *testing.T) {
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(failAlways)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(failAlways, "later").With(MaxRetries(1), Backoff(time.Hour))))
	before := float64(time.Now().UnixNano()) / 1e9
	runWorker(t, w)
	ctx := context.Background()
	var members []goredisZ
	waitFor(t, "the retry to be scheduled", func() bool {
		members = scheduled(t, server, q)
		return len(members) == 1
	})
	after := float64(time.Now().UnixNano()) / 1e9
	member := members[0]
	if member.score < before+3600 || member.score > after+3600 {
		t.Errorf("due at %v, want an hour after its failure (%v to %v)", member.score, before+3600, after+3600)
	}
	if member.member[0] != scheduledRetry || len(member.member) <= scheduledPrefixBytes {
		t.Errorf("member %q: not a retry's nonce", member.member)
	}
	retry, err := DeserializeGoTask([]byte(member.member[scheduledPrefixBytes:]))
	if err != nil || retry.Options().Attempt != 1 {
		t.Errorf("the retry %+v, %v; want attempt 1", retry, err)
	}
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("the retried task is still held")
	}
}

func TestBackoffIsSidekiqsCurveWithJitterUnlessSet(t *testing.T) {
	for attempt, bounds := range map[int][2]float64{1: {16, 36}, 2: {31, 61}, 4: {271, 321}} {
		for i := 0; i < 100; i++ {
			if got := backoffSeconds(TaskOptions{}, attempt); got < bounds[0] || got >= bounds[1] {
				t.Fatalf("attempt %d waits %v s, want %v to %v", attempt, got, bounds[0], bounds[1])
			}
		}
	}
	seconds := 2.5
	if got := backoffSeconds(TaskOptions{Backoff: &seconds}, 3); got != 2.5 {
		t.Errorf("Backoff(2.5 s) waits %v", got)
	}
}

func TestAHandlerPastItsTimeLimitIsTimedOut(t *testing.T) {
	resetHandlers()
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(waitForDeadline, ignoreDeadline, addNumbers)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(waitForDeadline).With(TimeLimit(50*time.Millisecond))),
		blob(t, NewGoTaskOfFunc(ignoreDeadline).With(TimeLimit(50*time.Millisecond))))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 2)
	for _, letter := range records {
		if letter.Reason != ReasonTimedOut || letter.Error != "TimeLimitExceeded: ran longer than its time limit of 0.05 s" ||
			letter.Traceback != nil {
			t.Errorf("letter %+v", letter)
		}
	}
	if failures.get("returned") != 0 {
		t.Fatal("the handler that ignores its deadline returned before it was released")
	}
	// dead-lettered while it still runs: abandoned, and the worker's one slot runs the next task
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 1, 1)))
	waitFor(t, "a task after the abandoned one", func() bool { return added.total() == 1 })
	if failures.get("returned") != 0 {
		t.Fatal("the handler that ignores its deadline returned before it was released")
	}
	close(release)
	waitFor(t, "the abandoned handler to return", func() bool { return failures.get("returned") == 1 })
}

func TestATimedOutTaskWithRetriesIsRetried(t *testing.T) {
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(waitForDeadline)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(waitForDeadline).With(TimeLimit(10*time.Millisecond), MaxRetries(1), Backoff(0))))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 1)
	if failures.get("waited") != 2 || records[0].Reason != ReasonTimedOut {
		t.Errorf("ran %d times, then %+v; want twice, then timed_out", failures.get("waited"), records[0])
	}
}

func TestExecuteRunsATaskHereAndLogsItsFailure(t *testing.T) {
	resetHandlers()
	failures = counter{}
	server := startRedis(t)
	logs := &logLines{}
	w := newTestWorker(t, testQueue(t, server, "jobs"), Logger(logs.logger()))
	w.RegisterHandlers(addNumbers, panicAlways)
	w.Execute(NewGoTaskOfFunc(addNumbers, 2, 3))
	if value, _ := sums.Load("2+3"); value != 5 {
		t.Errorf("Execute ran addNumbers(2, 3) as %v", value)
	}
	w.Execute(NewGoTaskOfFunc(panicAlways, "here"))
	w.Execute(NewGoTask("main.Missing"))
	for _, line := range []string{`msg="task failed" func=` + FuncPath(panicAlways) + ` task=- error="panic: no here"`,
		`msg="task not run" func=main.Missing task=- reason=not_allowed`} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no log line %s in\n%s", line, logs)
		}
	}
}

// goredisZ is a member of a sorted set and its score.
type goredisZ struct {
	member string
	score  float64
}

func scheduled(t testing.TB, server *testRedis, q *Queue) []goredisZ {
	t.Helper()
	members, err := server.Client.ZRangeWithScores(context.Background(), q.keys.key("scheduled"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []goredisZ
	for _, m := range members {
		out = append(out, goredisZ{m.Member.(string), m.Score})
	}
	return out
}
