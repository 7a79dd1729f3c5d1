package delayed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Dead letters a sweep writes: its crash loops (delayed/wire/dead_letter.py's format, which
// `delayed dead`, the dashboard and Python's workers read).
const (
	// ReasonCrashLoop is the reason of a task our workers died holding more often than a sweeper's max crashes.
	ReasonCrashLoop = "crash_loop"
	// defaultDeadMax and defaultDeadMaxAge bound a queue's letters as one is written (Python's Queue defaults).
	defaultDeadMax    = 10_000
	defaultDeadMaxAge = 7 * 24 * time.Hour
)

var buryScript = loadScript("bury")

// crashLoop is a task one of our workers died holding that a sweep dead-lettered: its workers died
// holding it more than the sweep's max crashes, or it is no task (reason malformed). buried is false
// if another sweeper took it first.
type crashLoop struct {
	workerID string
	funcPath string
	crashes  int
	reason   string
	buried   bool
}

// crashed counts a crash in a task one of our workers died holding: the blob to requeue it as (its
// crashes one higher), or, dead-lettered, its crashLoop.
func (q *Queue) crashed(ctx context.Context, workerID string, blob []byte, maxCrashes int) ([]byte, *crashLoop, error) {
	task, err := decodeTask(blob)
	var malformed *MalformedTaskError
	if errors.As(err, &malformed) { // a worker of ours would dead-letter it: it cannot count crashes
		loop := &crashLoop{workerID: workerID, funcPath: malformed.FuncPath, crashes: 1, reason: malformed.Reason}
		loop.buried, err = q.buryCrashed(ctx, loop, blob, "", "its worker died holding it; "+malformed.Error())
		return nil, loop, err
	}
	o := optionsOf(task)
	o.Crashes++
	if o.Crashes <= maxCrashes {
		again, err := blobWithOptions(blob, o)
		return again, nil, err
	}
	loop := &crashLoop{workerID: workerID, funcPath: task.getFuncPath(), crashes: o.Crashes, reason: ReasonCrashLoop}
	loop.buried, err = q.buryCrashed(ctx, loop, blob, o.ID,
		fmt.Sprintf("its worker died while holding it %d times (the limit is %d)", o.Crashes, maxCrashes))
	return nil, loop, err
}

// buryCrashed writes the dead letter of a task its workers died holding and releases it (bury.lua,
// fenced: only if the id still holds the blob); a tracked one's record (id) ends as dead.
func (q *Queue) buryCrashed(ctx context.Context, loop *crashLoop, blob []byte, id, message string) (bool, error) {
	var funcPath *string
	if loop.funcPath != "" {
		funcPath = &loop.funcPath
	}
	record, err := json.Marshal(struct {
		Reason   string  `json:"reason"`
		Error    string  `json:"error"`
		Func     *string `json:"func"`
		Queue    string  `json:"queue"`
		Worker   string  `json:"worker"`
		FailedAt string  `json:"failed_at"`
	}{loop.reason, message, funcPath, q.name, loop.workerID, time.Now().UTC().Format("2006-01-02T15:04:05.000-07:00")})
	if err != nil {
		return false, err
	}
	records, status, trackedError := []any{}, "", ""
	if id != "" {
		records = []any{q.keys.task(id)}
		status, trackedError = string(TaskDead), fmt.Sprintf("its workers died running it %d times", loop.crashes)
	}
	reply, err := buryScript.run(ctx, q.conn, q.keys, args{
		"record": records, "worker_id": loop.workerID, "claimed": blob, "dead_max": defaultDeadMax,
		"dead_max_age_ms": defaultDeadMaxAge.Milliseconds(), "status": status, "error": trackedError,
		"letter": []any{"record", record, "task", blob},
	})
	buried, _ := reply.(int64)
	return buried == 1, err
}
