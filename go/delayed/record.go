package delayed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/shamaton/msgpack/v2"
)

// TaskStatus is a tracked task's status, as its record stores it (delayed/wire/tracking.py's Status;
// go-delayed's StatusRunning, ... are a worker's). A task ends as TaskDone, TaskFailed, TaskDead or
// TaskCancelled.
type TaskStatus string

// The statuses of a tracked task (TaskInfo says what goes with each).
const (
	TaskWaiting   TaskStatus = "waiting"   // a workflow's step waiting on the steps before it: EnqueuedAt
	TaskScheduled TaskStatus = "scheduled" // waits in the scheduled set (a delay, or At): Due
	TaskPending   TaskStatus = "pending"   // waits in the queue: EnqueuedAt
	TaskRunning   TaskStatus = "running"   // a worker claimed it: Worker, StartedAt
	TaskRetrying  TaskStatus = "retrying"  // it failed and runs again: Attempts, Due (the next run), Error
	TaskDone      TaskStatus = "done"      // it returned: Result, FinishedAt, RunTime, Note
	TaskFailed    TaskStatus = "failed"    // it failed with no retries left, dead-lettered: Error, Letter
	TaskDead      TaskStatus = "dead"      // dead-lettered without running (unknown handler, a crash loop, ...): Error, Letter
	TaskCancelled TaskStatus = "cancelled" // Cancel removed it before it ran, or requested its cancel while it ran: FinishedAt
)

// Ended says whether a task with this status has ended: done, failed, dead or cancelled.
func (s TaskStatus) Ended() bool {
	return s == TaskDone || s == TaskFailed || s == TaskDead || s == TaskCancelled
}

// ErrTaskNotFound is the error (errors.Is) of a handle whose task has no record: never tracked (enqueued
// without ResultTTL), or it expired ResultTTL after the task ended.
var ErrTaskNotFound = errors.New("delayed: task not found")

// notStoredAsMsgpack is the note of a record whose result does not decode (Python's parse says the same).
const notStoredAsMsgpack = "the stored result is not msgpack"

// peekRecordScript reads a record and its TTL at once, the blob cut short (delayed/protocol/lua/peek_record.lua).
var peekRecordScript = loadScript("peek_record")

// TaskInfo is a tracked task's record, read at one moment (delayed/wire/tracking.py's TaskInfo). A field
// the status does not come with is its zero value.
type TaskInfo struct {
	ID     string     // the task's id
	Queue  string     // the queue's name
	Status TaskStatus // a scheduled task that is due reads as pending
	Func   string     // the task's func path

	EnqueuedAt time.Time     // when it was enqueued
	Attempts   int           // runs a worker started so far (a task given back unstarted is not counted)
	Due        time.Time     // when it is due (scheduled), or runs again (retrying)
	Worker     string        // the id of the worker that claimed it
	StartedAt  time.Time     // when its last run started
	FinishedAt time.Time     // when it ended
	RunTime    time.Duration // how long its last run took, as its worker measured (the record's seconds)

	Result *TaskResult // done: what it returned
	Note   string      // why the result was stored otherwise (not msgpack, over the size limit)
	Error  string      // what its last run failed with (retrying, failed, dead)
	Letter string      // its dead letter's id (failed, dead)

	ExpiresIn time.Duration // the time its record has left once the task ended; 0 before

	// CancelRequestedAt is when its cancel was requested while a worker ran it (or was taking it): it
	// ends cancelled, whatever it does then; zero if none was.
	CancelRequestedAt time.Time
}

// TaskResult is what a task returned: the msgpack its worker stored (Python's msgpack.packb of the
// return value, or the msgpack of a Go handler's T).
type TaskResult struct {
	raw []byte
}

// Raw is the result's msgpack bytes.
func (r *TaskResult) Raw() []byte { return r.raw }

// Decode decodes the result into out (a pointer), with shamaton/msgpack as go-delayed decodes
// arguments: a Python dict decodes into a map, or a struct whose field names (or msgpack tags) are its
// keys; a Python tuple or list into a slice.
func (r *TaskResult) Decode(out any) error {
	return msgpack.Unmarshal(r.raw, out)
}

// TaskFailedError is the error (errors.As) of Result for a task that ended without a result: failed,
// dead (dead-lettered) or cancelled. Info is its record: Info.Status, Info.Error, Info.Letter.
type TaskFailedError struct {
	Info *TaskInfo
}

// Error says the task, how it ended and its record's error: "task ID (FUNC) failed: ERROR".
func (e *TaskFailedError) Error() string {
	detail := ""
	if e.Info.Error != "" {
		detail = ": " + e.Info.Error
	}
	return fmt.Sprintf("task %s (%s) %s%s", e.Info.ID, e.Info.Func, e.Info.Status, detail)
}

// readRecord reads a tracked task's record (ErrTaskNotFound if it has none).
func (q *Queue) readRecord(ctx context.Context, id string) (*TaskInfo, error) {
	reply, err := peekRecordScript.run(ctx, q.conn, nil, args{"record": q.keys.task(id), "head": 0})
	if err != nil {
		return nil, err
	}
	items, _ := reply.([]any)
	if len(items) < 2 || len(items)%2 != 0 {
		return nil, InvalidRedisReplyError
	}
	if len(items) == 2 {
		return nil, q.noRecord(id)
	}
	fields := map[string]string{}
	for i := 2; i < len(items); i += 2 {
		key, _ := items[i].(string)
		fields[key], _ = items[i+1].(string)
	}
	ttl, _ := items[0].(int64)
	return parseRecord(id, q.name, fields, ttl, time.Now()), nil
}

// noRecord is the error of a task without a record.
func (q *Queue) noRecord(id string) error {
	return fmt.Errorf("%w: no record of task %s in %s: never tracked (enqueued without result_ttl), "+
		"or it expired result_ttl seconds after the task ended", ErrTaskNotFound, id, q.name)
}

// parseRecord is a record's fields and TTL (seconds, negative for none) as a TaskInfo; a field that
// does not read as what the scripts write reads as missing (Python's tracking.parse).
func parseRecord(id, queue string, fields map[string]string, ttl int64, now time.Time) *TaskInfo {
	number := func(name string) (float64, bool) {
		value, err := strconv.ParseFloat(fields[name], 64)
		return value, err == nil && !math.IsInf(value, 0) && !math.IsNaN(value)
	}
	moment := func(name string) time.Time {
		if value, ok := number(name); ok {
			return time.Unix(0, int64(value*1e9))
		}
		return time.Time{}
	}
	status, found := fields["status"]
	if !found {
		status = "?"
	}
	info := &TaskInfo{
		ID: id, Queue: queue, Status: TaskStatus(status), Func: fields["func"], EnqueuedAt: moment("enqueued"),
		Due: moment("due"), Worker: fields["worker"], StartedAt: moment("started"), FinishedAt: moment("finished"),
		Note: fields["note"], Error: fields["error"], Letter: fields["letter"], CancelRequestedAt: moment("cancel_requested"),
	}
	if attempts, ok := number("attempts"); ok {
		info.Attempts = int(attempts)
	}
	if seconds, ok := number("seconds"); ok {
		info.RunTime = time.Duration(seconds * float64(time.Second))
	}
	if ttl >= 0 {
		info.ExpiresIn = time.Duration(ttl) * time.Second
	}
	if info.Status == TaskScheduled && !info.Due.IsZero() && !info.Due.After(now) {
		info.Status = TaskPending // due: moving due tasks puts it into the queue, if not done yet
	}
	if info.Status == TaskDone {
		result, stored := fields["result"]
		if !stored {
			result = "\xc0"
		}
		if r := (&reader{data: []byte(result)}); isMsgpack(r) {
			info.Result = &TaskResult{raw: r.data}
		} else {
			info.Result, info.Note = &TaskResult{raw: []byte{0xc0}}, notStoredAsMsgpack
		}
	}
	return info
}

// isMsgpack says whether r holds exactly one msgpack value.
func isMsgpack(r *reader) bool {
	_, err := r.skip()
	return err == nil && r.at == len(r.data)
}
