package delayed

import (
	"context"
	"fmt"
	"time"
)

// Result looks at the record after firstPoll, then twice as long each time, at most every maxPoll
// (as Python's TaskHandle.result does).
const (
	firstPoll = 5 * time.Millisecond
	maxPoll   = 500 * time.Millisecond
)

var cancelScript = loadScript("cancel")

// TaskHandle is a tracked task (enqueued with ResultTTL) on a queue: read its status, wait for its
// result, cancel it. It holds only the queue and the task's id and reads the task's record in Redis at
// each call, so a handle rebuilt from the id (Queue.Handle) in another process works the same, and so
// does one of a task a Python producer enqueued (Python's handle.id).
type TaskHandle struct {
	queue *Queue
	id    string
}

// Handle is the handle of the tracked task with this id (32 hex digits) on the queue.
func (q *Queue) Handle(id string) *TaskHandle {
	return &TaskHandle{queue: q, id: id}
}

// ID is the task's id: keep it to look the task up later (Queue.Handle, `delayed task ID`).
func (h *TaskHandle) ID() string { return h.id }

// Info reads the task's record now; ErrTaskNotFound once it expired (or if it was never tracked).
func (h *TaskHandle) Info(ctx context.Context) (*TaskInfo, error) {
	return h.queue.readRecord(ctx, h.id)
}

// Status reads the task's status now (Info has what goes with it).
func (h *TaskHandle) Status(ctx context.Context) (TaskStatus, error) {
	info, err := h.Info(ctx)
	if err != nil {
		return "", err
	}
	return info.Status, nil
}

// Result waits until the task ended, and returns what it returned. A task that failed, went dead or
// was cancelled returns a *TaskFailedError holding its record; ctx's deadline or cancellation ends the
// wait with an error that wraps ctx.Err(), saying the status the task still had; ErrTaskNotFound if
// the record expired or never was. It looks at the record after 5 ms, then twice as long each time,
// at most every 0.5 s.
func (h *TaskHandle) Result(ctx context.Context) (*TaskResult, error) {
	wait := firstPoll
	for {
		info, err := h.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.Status.Ended() {
			if info.Status != TaskDone {
				return nil, &TaskFailedError{Info: info}
			}
			return info.Result, nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("task %s still %s: %w", h.id, info.Status, ctx.Err())
		case <-timer.C:
		}
		wait = min(2*wait, maxPoll)
	}
}

// Cancellation is what Cancel did.
type Cancellation struct {
	Cancelled bool       // whether the task was cancelled: it waited, and will never run
	Requested bool       // whether its cancel was requested: a worker runs it (or is taking it), and it ends cancelled
	Worker    string     // with Requested, the id of the worker running it ("" while one is taking it)
	Status    TaskStatus // the status it had: what it was when cancelled or requested, or why it was not (ended)
	Reason    string     // what happened, in a line
}

// Cancel cancels the task. One that waits (scheduled, pending, retrying, or a workflow's step waiting on
// the steps before it) is removed and its record ends as cancelled, and so do the steps of its workflow
// that needed it to succeed. One a worker runs (or is taking) has its cancel requested: the worker
// stops it (a Go handler's context is cancelled with ErrCancelled as its cause, a Python coroutine gets
// CancelledError, a Python function sees delayed.current().cancelled), and whatever it does then, it
// ends cancelled, its result not kept, never retried. ErrTaskNotFound if it has no record.
func (h *TaskHandle) Cancel(ctx context.Context) (*Cancellation, error) {
	q := h.queue
	reply, err := cancelScript.run(ctx, q.conn, q.keys, args{"record": q.keys.task(h.id)})
	if err != nil {
		return nil, err
	}
	items, _ := reply.([]any)
	if len(items) != 3 {
		return nil, InvalidRedisReplyError
	}
	outcome, _ := items[0].(string)
	text, _ := items[1].(string)
	worker, _ := items[2].(string)
	status := TaskStatus(text)
	if outcome == "missing" {
		return nil, q.noRecord(h.id)
	}
	if outcome == "requested" {
		where := "is being taken by a worker"
		if worker != "" {
			where = "is running on worker " + worker
		}
		return &Cancellation{Requested: true, Worker: worker, Status: status,
			Reason: fmt.Sprintf("cancel requested: task %s %s; it ends cancelled", h.id, where)}, nil
	}
	reasons := map[string]string{
		"cancelled": fmt.Sprintf("cancelled task %s (%s) in %s", h.id, status, q.name),
		"lost": fmt.Sprintf("task %s is no longer in %s though its record says %s: a worker that does not "+
			"track tasks took it", h.id, q.name, status),
		"not_waiting": fmt.Sprintf("task %s already ended (%s)", h.id, status),
	}
	reason, known := reasons[outcome]
	if !known {
		return nil, InvalidRedisReplyError
	}
	return &Cancellation{Cancelled: outcome == "cancelled", Status: status, Reason: reason}, nil
}
