package delayed

import (
	"context"
	"testing"
	"time"
)

// deadHolder holds blob in q's processing hash under an id of ours whose keep-alive key is gone, as a
// worker SIGKILLed long ago leaves it.
func deadHolder(t testing.TB, server *testRedis, q *Queue, blob []byte) string {
	t.Helper()
	id := q.keys.workerIDs(1)[0]
	if err := server.Client.HSet(context.Background(), q.keys.key("processing"), id, blob).Err(); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestTheWorkerSweepsADeadWorkersTaskBackAndRunsIt(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	lost := blob(t, NewGoTaskOfFunc(addNumbers, 6, 6))
	holder := deadHolder(t, server, q, lost)
	w := newTestWorker(t, q, SweepInterval(50*time.Millisecond))
	w.RegisterHandlers(addNumbers)
	runWorker(t, w)
	waitFor(t, "the lost task to run", func() bool { return added.get("6+6") == 1 })
	ctx := context.Background()
	if server.Client.HExists(ctx, q.keys.key("processing"), holder).Val() {
		t.Error("the dead worker still holds its task")
	}
}

func TestTheWorkersSweepDeadLettersACrashLoop(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	task := NewGoTaskOfFunc(addNumbers, 9, 9)
	options := task.Options()
	options.Crashes = 2
	holder := deadHolder(t, server, q, blob(t, task.withState(options)))
	w := newTestWorker(t, q, SweepInterval(50*time.Millisecond), MaxCrashes(2))
	w.RegisterHandlers(addNumbers)
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 1)
	letter := records[0]
	if letter.Reason != ReasonCrashLoop || letter.Worker == nil || *letter.Worker != holder || *letter.Func != FuncPath(addNumbers) ||
		letter.Error != "its worker died while holding it 3 times (the limit is 2)" {
		t.Errorf("letter %+v", letter)
	}
	if added.total() != 0 {
		t.Error("a crash loop ran")
	}
}
