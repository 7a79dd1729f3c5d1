package delayed

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"
)

var started counter

// noop is a task that does nothing, counted.
func noop(name string) { started.add(name) }

// blockOnce blocks until release is closed, saying when it started (entered).
func blockOnce(name string) {
	started.add(name)
	entered <- name
	<-release
}

// blockPastGrace waits for its context (cancelled once the grace period ends) or release.
func blockPastGrace(ctx context.Context, name string) error {
	started.add(name)
	entered <- name
	select {
	case <-ctx.Done():
		started.add("cancelled")
		return ctx.Err()
	case <-release:
		return nil
	}
}

func TestAStopGivesBackTheTasksNotStartedAndFinishesTheRunningOne(t *testing.T) {
	resetHandlers()
	started = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(noop, blockOnce)
	// no-op tasks first, so that the worker claims ahead of its one slot (their mean run time is short)
	for i := 0; i < 100; i++ {
		enqueue(t, q, blob(t, NewGoTaskOfFunc(noop, "warm"+strconv.Itoa(i))))
	}
	stop := runWorker(t, w)
	waitFor(t, "the first tasks", func() bool { return started.total() == 100 })
	var behind [][]byte
	for i := 0; i < 10; i++ {
		behind = append(behind, blob(t, NewGoTaskOfFunc(noop, "behind"+strconv.Itoa(i))))
	}
	enqueue(t, q, append([][]byte{blob(t, NewGoTaskOfFunc(blockOnce, "slow"))}, behind...)...)
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	ctx := context.Background()
	waitFor(t, "the tasks behind the running one to be back in the queue", func() bool {
		return server.Client.LLen(ctx, q.keys.name).Val() == int64(len(behind))
	})
	select {
	case err := <-stopped:
		t.Fatalf("the worker stopped (%v) while its task ran", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	queued := server.Client.LRange(ctx, q.keys.name, 0, -1).Val()
	for i, data := range behind {
		if queued[i] != string(data) {
			t.Fatalf("queue holds %q at %d, want the tasks in their order", queued[i], i)
		}
	}
	if n := server.Client.LLen(ctx, q.keys.key("noti")).Val(); n != int64(len(behind)) {
		t.Errorf("%d notifications for %d tasks given back", n, len(behind))
	}
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d tasks held after a clean stop: they would run again", held)
	}
	if started.get("slow") != 1 || started.total() != 101 {
		t.Errorf("ran %v: the running task once, none of those behind it", started.calls)
	}
	if server.Client.Exists(ctx, w.ID()).Val() != 0 {
		t.Error("still online after a clean stop")
	}
}

func TestAGracePeriodLeavesATaskStillRunningHeldForASweeper(t *testing.T) {
	resetHandlers()
	started = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q, GracePeriod(10*time.Millisecond))
	w.RegisterHandlers(blockPastGrace)
	data := blob(t, NewGoTaskOfFunc(blockPastGrace, "long"))
	enqueue(t, q, data)
	stop := runWorker(t, w)
	<-entered
	err := stop()
	if !errors.Is(err, ErrTasksLeftRunning) {
		t.Fatalf("RunContext returned %v, want ErrTasksLeftRunning", err)
	}
	waitFor(t, "the task's context to be cancelled", func() bool { return started.get("cancelled") == 1 })
	ctx := context.Background()
	held := server.Client.HGetAll(ctx, q.keys.key("processing")).Val()
	if len(held) != 1 || held[w.ID()] != string(data) {
		t.Errorf("held %v, want the running task still held by %s", held, w.ID())
	}
	if server.Client.Exists(ctx, w.ID()).Val() != 1 {
		t.Error("keep-alive key deleted while the worker held a task: a sweeper would requeue it at once, not once it lapsed")
	}
	if done := server.Client.HGet(ctx, q.keys.key("counts"), "done").Val(); done != "" {
		t.Errorf("the task left running was released (done %s)", done)
	}
}

func TestStopBeforeRedisAnswersReturns(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	server.cmd.Process.Kill()
	server.cmd.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- w.RunContext(ctx) }()
	waitFor(t, "the worker to run", func() bool { return w.Status() == StatusRunning })
	cancel()
	select {
	case err := <-result:
		if err != nil {
			t.Errorf("RunContext = %v", err)
		}
	case <-time.After(waitDeadline):
		t.Fatal("a worker that never reached Redis did not stop")
	}
	if w.Status() != StatusStopped {
		t.Errorf("status %d after its run", w.Status())
	}
}

func TestRunTwiceAtOnceIsRefused(t *testing.T) {
	server := startRedis(t)
	w := newTestWorker(t, testQueue(t, server, "jobs"))
	runWorker(t, w)
	if err := w.RunContext(context.Background()); err == nil {
		t.Fatal("a second RunContext ran beside the first")
	}
}

func TestADrainGivesBackWhatWasClaimedInOrderAndReleasesWhatFinished(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	w := newTestWorker(t, q)
	w.stop, w.force = make(chan struct{}), make(chan struct{})
	if !w.goOnline() {
		t.Fatal("not online")
	}
	first := blob(t, NewGoTaskOfFunc(addNumbers, 0, 0))
	id := enqueueTracked(t, q, NewGoTaskOfFunc(addNumbers, 1, 1), ResultTTL(time.Minute)).ID()
	tracked := []byte(server.Client.LIndex(ctx, q.keys.name, 0).Val())
	var rest [][]byte
	for i := 2; i < 6; i++ {
		rest = append(rest, blob(t, NewGoTaskOfFunc(addNumbers, i, i)))
	}
	server.Client.LPush(ctx, q.keys.name, first)
	server.Client.LPush(ctx, q.keys.key("noti"), "1")
	enqueue(t, q, rest...)
	d := newDispatcher(w) // no slots: the claims wait in ready, as when every slot is busy
	claims, _, err := d.hold.claim(ctx, 6)
	if err != nil || len(claims) != 6 {
		t.Fatalf("claimed %d tasks (%v)", len(claims), err)
	}
	d.hold.release(claims[0], nil, nil) // the first one ran
	d.load(claims[1:])
	close(w.stop)
	if left := d.drain(); left != 0 {
		t.Fatalf("%d tasks left running", left)
	}
	want := append([]string{string(tracked)}, func() (out []string) {
		for _, data := range rest {
			out = append(out, string(data))
		}
		return
	}()...)
	if queued := server.Client.LRange(ctx, q.keys.name, 0, -1).Val(); !reflect.DeepEqual(queued, want) {
		t.Errorf("the queue holds %q, want the claimed tasks in their order", queued)
	}
	if n := server.Client.LLen(ctx, q.keys.key("noti")).Val(); n != 5 {
		t.Errorf("%d notifications for 5 tasks", n)
	}
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d tasks still held", held)
	}
	if done := server.Client.HGet(ctx, q.keys.key("counts"), "done").Val(); done != "1" {
		t.Errorf("counts done %q, want the finished one released", done)
	}
	if status := server.Client.HGet(ctx, q.keys.task(id), "status").Val(); status != "pending" {
		t.Errorf("the given back tracked task's record says %q, want pending", status)
	}
}

func TestTasksClaimedBehindASlowOneGoBackForAnotherWorker(t *testing.T) {
	resetHandlers()
	started = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	logs := &logLines{}
	slow := newTestWorker(t, q, Logger(logs.logger()))
	slow.RegisterHandlers(noop, blockOnce)
	for i := 0; i < 50; i++ { // short tasks first: the worker then claims ahead of its one slot
		enqueue(t, q, blob(t, NewGoTaskOfFunc(noop, "warm"+strconv.Itoa(i))))
	}
	runWorker(t, slow)
	waitFor(t, "the short tasks", func() bool { return started.total() == 50 })
	var behind [][]byte
	for i := 0; i < 5; i++ {
		behind = append(behind, blob(t, NewGoTaskOfFunc(noop, "behind"+strconv.Itoa(i))))
	}
	enqueue(t, q, append([][]byte{blob(t, NewGoTaskOfFunc(blockOnce, "slow"))}, behind...)...)
	<-entered
	logs.waitLog(t, `msg="gave back claimed tasks none of which started within the patience: the slots are busy"`)
	other := newTestWorker(t, testQueue(t, server, "jobs"))
	other.RegisterHandlers(noop)
	runWorker(t, other)
	waitFor(t, "the other worker to run the tasks behind the slow one", func() bool {
		for i := range behind {
			if started.get("behind"+strconv.Itoa(i)) != 1 {
				return false
			}
		}
		return true
	})
	close(release)
}

func TestKeepAliveBeforeRunKeepsTheWorkersIDs(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers)
	w.KeepAlive()
	id := w.ID()
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 4, 4)))
	stop := runWorker(t, w)
	waitFor(t, "the task", func() bool { return added.total() == 1 })
	if err := stop(); err != nil || w.ID() != id || q.workerID != id {
		t.Errorf("after KeepAlive then Run: %v, ids %s and %s, want %s", err, w.ID(), q.workerID, id)
	}
	if keys := server.Client.Keys(context.Background(), workerIDPrefix+"*").Val(); len(keys) != 0 {
		t.Errorf("%d keep-alive keys left, %s among them", len(keys), keys[0])
	}
}
