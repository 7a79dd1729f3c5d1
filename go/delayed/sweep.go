package delayed

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// How a sweep works through a queue, as Python's sweeper_ops.py does.
const (
	// DefaultMaxCrashes is how many times our workers may die holding a task before a sweep dead-letters it.
	DefaultMaxCrashes = 3
	// sweepChunk is how many holders one requeue_lost call looks at, so no call keeps Redis busy long.
	sweepChunk = 100
	// notifyChunk is how many notifications one notify_missing call pushes at most.
	notifyChunk = 5000
	// notifyAfter is how long the head of a queue short of notifications must stand still before a
	// sweep tops them up: sooner, a worker between its BLPOP and its dequeue would find a stray one.
	notifyAfter = time.Second
	// moveDueLimit is the most tasks one move_due call moves, so a burst never blocks Redis for long.
	moveDueLimit = 1000
)

var (
	requeueLostScript   = loadScript("requeue_lost")
	notifyMissingScript = loadScript("notify_missing")
	claimSweepScript    = loadScript("claim_sweep")
	moveDueScript       = loadScript("move_due")
)

// sweepResult is what one sweep of a queue did.
type sweepResult struct {
	notified   int          // notifications pushed: one per task requeued, and the missing ones
	crashLoops []*crashLoop // tasks it dead-lettered
	failures   []string     // held tasks it could not handle, left for the next sweep: why, each
}

// RequeueLost requeues the tasks of dead workers and tops up missing notifications, now (go-delayed's
// signature, our sweep): the notifications pushed, one per task requeued and the missing ones. It
// counts our workers' deaths in the tasks they held and dead-letters a task once they died holding it
// more than DefaultMaxCrashes times (Sweeper.SetMaxCrashes sets another limit). It should be called
// periodically, as a Sweeper does.
func (q *Queue) RequeueLost() (count int, err error) {
	swept, err := q.sweep(context.Background(), DefaultMaxCrashes)
	return swept.notified, err
}

// sweep requeues the tasks held by ids whose keep-alive key lapsed (requeue_lost.lua), as Python's
// SweeperOps.sweep does. A task one of our workers died holding comes back with its crashes option one
// higher, or goes to the dead letters (reason crash_loop) once over maxCrashes (0: none counted, every
// task requeued as it is); a go-delayed worker's is requeued as it is, since one never releases its
// last task and so leaves one behind at every clean stop. Holders are handed over sweepChunk at a time.
func (q *Queue) sweep(ctx context.Context, maxCrashes int) (sweepResult, error) {
	var result sweepResult
	reply, err := q.conn.do(ctx, "HKEYS", q.keys.key("processing"))
	if err != nil {
		return result, err
	}
	items, _ := reply.([]any)
	holders := make([]any, 0, len(items))
	cluster, slot := q.onCluster(), keySlot(q.name)
	for _, item := range items {
		if id, _ := item.(string); !cluster || keySlot(id) == slot { // a Cluster script declares only its slot's keys
			holders = append(holders, id)
		}
	}
	type held struct {
		workerID    string
		blob, again []byte
	}
	var crashed []held
	for start := 0; start < len(holders); start += sweepChunk {
		requeued, left, err := q.requeueLost(ctx, holders[start:min(start+sweepChunk, len(holders))], maxCrashes > 0, nil)
		if err != nil {
			return result, err
		}
		result.notified += requeued
		for i := 0; i+1 < len(left); i += 2 {
			id, _ := left[i].(string)
			blob, _ := left[i+1].(string)
			crashed = append(crashed, held{workerID: id, blob: []byte(blob)})
		}
	}
	var again []held
	for _, task := range crashed {
		blob, loop, err := q.crashed(ctx, task.workerID, task.blob, maxCrashes)
		switch {
		case err != nil:
			result.failures = append(result.failures, fmt.Sprintf("%s: %v", task.workerID, err))
		case loop != nil:
			result.crashLoops = append(result.crashLoops, loop)
		default:
			task.again = blob
			again = append(again, task)
		}
	}
	for start := 0; start < len(again); start += sweepChunk {
		var ids, rewrites []any
		for _, task := range again[start:min(start+sweepChunk, len(again))] {
			ids, rewrites = append(ids, task.workerID), append(rewrites, task.blob, task.again)
		}
		requeued, _, err := q.requeueLost(ctx, ids, true, rewrites)
		if err != nil {
			return result, err
		}
		result.notified += requeued
	}
	notified, err := q.notifyMissing(ctx)
	result.notified += notified
	return result, err
}

// requeueLost is one requeue_lost.lua call on holders: how many tasks it requeued, and the ids and
// blobs of our dead workers it left in place (counting). rewrites: per holder, the blob it held and
// the blob to requeue it as (its crash counted).
func (q *Queue) requeueLost(ctx context.Context, holders []any, counting bool, rewrites []any) (int, []any, error) {
	flag := 0
	if counting {
		flag = 1
	}
	reply, err := requeueLostScript.run(ctx, q.conn, q.keys, args{
		"holders": holders, "counting": flag, "worker_id_prefix": workerIDPrefix,
		"worker_id_suffix": q.keys.workerIDSuffix(), "rewrites": rewrites,
	})
	if err != nil {
		return 0, nil, err
	}
	items, _ := reply.([]any)
	if len(items) == 0 {
		return 0, nil, InvalidRedisReplyError
	}
	requeued, _ := items[0].(int64)
	return int(requeued), items[1:], nil
}

// notifyMissing tops up the queue's missing notifications, notifyChunk per call: how many it pushed.
func (q *Queue) notifyMissing(ctx context.Context) (int, error) {
	pushed := 0
	for {
		reply, err := notifyMissingScript.run(ctx, q.conn, q.keys, args{
			"still_ms": notifyAfter.Milliseconds(), "limit": notifyChunk, "now": time.Now().Unix(),
		})
		if err != nil {
			return pushed, err
		}
		items, _ := reply.([]any)
		if len(items) != 2 {
			return pushed, InvalidRedisReplyError
		}
		chunk, _ := items[0].(int64)
		missing, _ := items[1].(int64)
		pushed += int(chunk)
		if chunk == 0 || missing == 0 {
			return pushed, nil
		}
	}
}

// claimSweep claims the queue's next periodic sweep (claim_sweep.lua): whether to sweep it now, none
// of our workers and sweepers having swept it within interval.
func (q *Queue) claimSweep(ctx context.Context, interval time.Duration) (bool, error) {
	reply, err := claimSweepScript.run(ctx, q.conn, q.keys, args{"interval_ms": max(1, interval.Milliseconds()), "force": 0})
	claimed, _ := reply.(int64)
	return claimed == 1, err
}

// moveDue moves every due task of the scheduled set into the queue, with its notification,
// moveDueLimit a call (delayed/runtime/due.py's move_due_tasks).
func (q *Queue) moveDue(ctx context.Context) error {
	for {
		now := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', -1, 64)
		moved, err := moveDueScript.run(ctx, q.conn, q.keys, args{"now": now, "limit": moveDueLimit})
		if err != nil || moved != int64(moveDueLimit) {
			return err
		}
	}
}
