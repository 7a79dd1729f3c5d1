package delayed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The records these tests read are written as Python's worker writes them: by the same Lua scripts
// (claim_batch.lua claims and releases, bury.lua dead-letters, cancel.lua cancels), on tracked PyTasks.

// claimAs has workerID claim the task at the head of queue, as a worker of ours does: its record says running.
func claimAs(t *testing.T, queue *Queue, workerID string) string {
	t.Helper()
	reply, err := claimBatchScript.run(context.Background(), queue.conn, queue.keys, args{
		"info": queue.keys.workerInfo(workerID), "records": []any{}, "released_count": 0, "tracked_count": 0,
		"unnoted_count": 0, "released": []any{}, "results": []any{}, "unnoted": []any{}, "claim_ids": []any{workerID},
	})
	if err != nil {
		t.Fatal(err)
	}
	held := reply.([]any)
	if len(held) != 3 {
		t.Fatalf("claimed %q", held)
	}
	return held[2].(string)
}

// releaseAs has workerID release the tracked task id with its result, as a worker of ours does: done.
func releaseAs(t *testing.T, queue *Queue, workerID, id string, result []byte) {
	t.Helper()
	_, err := claimBatchScript.run(context.Background(), queue.conn, queue.keys, args{
		"info": queue.keys.workerInfo(workerID), "records": []any{queue.keys.task(id)}, "released_count": 0,
		"tracked_count": 1, "unnoted_count": 0, "released": []any{}, "results": []any{workerID, result, "", "0.25"},
		"unnoted": []any{}, "claim_ids": []any{},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// buryAs has workerID dead-letter the tracked task id it holds, its record ending as status with message.
func buryAs(t *testing.T, queue *Queue, workerID, blob, id string, status TaskStatus, message string) {
	t.Helper()
	reply, err := buryScript.run(context.Background(), queue.conn, queue.keys, args{
		"record": []any{queue.keys.task(id)}, "worker_id": workerID, "claimed": blob, "dead_max": 10,
		"dead_max_age_ms": 0, "status": string(status), "error": message, "letter": []any{"record", "{}", "task", blob},
	})
	if err != nil || reply.(int64) != 1 {
		t.Fatalf("bury: %v, %v", reply, err)
	}
}

func trackedTask(t *testing.T, queue *Queue) *TaskHandle {
	t.Helper()
	handle, err := queue.EnqueueContext(context.Background(), NewPyTask("tasks:add", []int{1, 2}, nil), ResultTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return handle
}

const testWorker = "delayed-py-0123456789abcdef0123456789abcdef"

func TestResultOfADoneTaskAndItsRecordAsPythonsWorkerWritesIt(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	handle := trackedTask(t, queue)
	if status, err := handle.Status(ctx); status != TaskPending || err != nil {
		t.Fatalf("status %q, %v", status, err)
	}
	claimAs(t, queue, testWorker)
	info, err := handle.Info(ctx)
	if err != nil || info.Status != TaskRunning || info.Worker != testWorker || info.Attempts != 1 ||
		info.StartedAt.IsZero() || info.Func != "tasks:add" || info.Queue != "q" || info.ID != handle.ID() {
		t.Fatalf("info %+v, %v", info, err)
	}
	waited := make(chan error, 1)
	var result *TaskResult
	go func() {
		result, err = handle.Result(ctx)
		waited <- err
	}()
	releaseAs(t, queue, testWorker, handle.ID(), []byte("\x81\xa3sum\x03")) // Python's msgpack.packb({"sum": 3})
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Sum int `msgpack:"sum"`
	}
	if err := result.Decode(&sum); err != nil || sum.Sum != 3 || string(result.Raw()) != "\x81\xa3sum\x03" {
		t.Fatalf("result %x decodes to %+v (%v)", result.Raw(), sum, err)
	}
	info, _ = handle.Info(ctx)
	if info.Status != TaskDone || info.RunTime != 250*time.Millisecond || info.FinishedAt.Before(info.StartedAt) ||
		info.ExpiresIn <= 0 || info.ExpiresIn > time.Hour {
		t.Fatalf("info %+v", info)
	}
}

func TestResultOfAFailedOrDeadTaskIsATaskFailedError(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	for _, status := range []TaskStatus{TaskFailed, TaskDead} {
		handle := trackedTask(t, queue)
		blob := claimAs(t, queue, testWorker)
		buryAs(t, queue, testWorker, blob, handle.ID(), status, "ValueError: boom")
		_, err := handle.Result(ctx)
		var failed *TaskFailedError
		if !errors.As(err, &failed) || failed.Info.Status != status || failed.Info.Error != "ValueError: boom" ||
			failed.Info.Letter == "" || err.Error() != "task "+handle.ID()+" (tasks:add) "+string(status)+": ValueError: boom" {
			t.Fatalf("%s: %v", status, err)
		}
	}
}

func TestCancelEndsAWaitingTaskAndItsResultSaysSo(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueueWithClient("q", server.Client)
	handle := trackedTask(t, queue)
	cancelled, err := handle.Cancel(ctx)
	if err != nil || !cancelled.Cancelled || cancelled.Status != TaskPending ||
		cancelled.Reason != "cancelled task "+handle.ID()+" (pending) in q" {
		t.Fatalf("cancel %+v, %v", cancelled, err)
	}
	if blobs, notifications, _ := queued(t, server, "q"); len(blobs) != 0 || notifications != 0 {
		t.Fatalf("left %q and %d notifications", blobs, notifications)
	}
	_, err = handle.Result(ctx)
	var failed *TaskFailedError
	if !errors.As(err, &failed) || failed.Info.Status != TaskCancelled {
		t.Fatalf("result: %v", err)
	}
	again, err := handle.Cancel(ctx)
	if err != nil || again.Cancelled || again.Reason != "task "+handle.ID()+" already ended (cancelled)" {
		t.Fatalf("cancel again %+v, %v", again, err)
	}

	running := trackedTask(t, queue)
	claimAs(t, queue, testWorker)
	if outcome, err := running.Cancel(ctx); err != nil || outcome.Cancelled || !outcome.Requested ||
		outcome.Status != TaskRunning || outcome.Worker != testWorker || outcome.Reason != "cancel requested: task "+
		running.ID()+" is running on worker "+testWorker+"; it ends cancelled" {
		t.Fatalf("cancel a running task: %+v, %v", outcome, err)
	}
	if info, err := running.Info(ctx); err != nil || info.Status != TaskRunning || info.CancelRequestedAt.IsZero() {
		t.Fatalf("a running task whose cancel was requested: %+v, %v", info, err)
	}
}

func TestResultEndsAtTheContextsDeadline(t *testing.T) {
	server := startRedis(t)
	queue := NewQueueWithClient("q", server.Client)
	handle := trackedTask(t, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := handle.Result(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still pending") {
		t.Fatalf("result: %v", err)
	}
}

func TestAHandleWithoutARecordIsNotFound(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	handle := NewQueue("q", NewRedisPool(server.Addr)).Handle("0123456789abcdef0123456789abcdef")
	if _, err := handle.Info(ctx); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("info: %v", err)
	}
	if _, err := handle.Result(ctx); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("result: %v", err)
	}
	if _, err := handle.Cancel(ctx); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("cancel: %v", err)
	}
}

func TestParseRecordReadsWhatPythonsParseReads(t *testing.T) {
	now := time.Unix(2000, 0)
	info := parseRecord("id", "q", map[string]string{"status": "scheduled", "due": "1999.5", "attempts": "x"}, -1, now)
	if info.Status != TaskPending || info.Attempts != 0 || info.ExpiresIn != 0 {
		t.Errorf("a due scheduled task: %+v", info)
	}
	info = parseRecord("id", "q", map[string]string{"status": "done", "result": "\xc1", "seconds": "nan"}, 30, now)
	if info.Note != notStoredAsMsgpack || string(info.Result.Raw()) != "\xc0" || info.RunTime != 0 || info.ExpiresIn != 30*time.Second {
		t.Errorf("a result that is not msgpack: %+v", info)
	}
	if info = parseRecord("id", "q", map[string]string{}, -1, now); info.Status != "?" {
		t.Errorf("no status: %+v", info)
	}
}
