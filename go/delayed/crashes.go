package delayed

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Dead letters a sweep writes: its crash loops (deadletter.go writes them, as it writes a worker's).

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
	var track *recordNews
	if id != "" {
		track = &recordNews{id: id, status: statusOf(loop.reason), err: fmt.Sprintf("its workers died running it %d times", loop.crashes)}
	}
	fields := letterFields(loop.reason, message, loop.funcPath, q.name, loop.workerID, "", string(blob), time.Now())
	return bury(ctx, q, loop.workerID, string(blob), fields, track)
}
