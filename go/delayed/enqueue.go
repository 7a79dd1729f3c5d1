package delayed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// maxTaskSize is the largest blob a producer enqueues, in bytes (Python's DEFAULT_MAX_TASK_SIZE): a
// worker of ours dead-letters a larger one as too_large.
const maxTaskSize = 1 << 20

var (
	enqueueScript        = loadScript("enqueue")
	enqueueTrackedScript = loadScript("enqueue_tracked")
	enqueueUniqueScript  = loadScript("enqueue_unique")
)

var (
	// ErrDuplicateTask is the error (errors.Is) of an enqueue with UniqueFor whose lock an identical
	// task (or one with the same UniqueKey) holds: queued, waiting for a retry, or running.
	ErrDuplicateTask = errors.New("delayed: duplicate task")
	// ErrTaskTooLarge is the error (errors.Is) of an enqueue whose blob is over 1 MiB, a worker's
	// limit; nothing was written.
	ErrTaskTooLarge = errors.New("delayed: task too large")
)

// Enqueue appends a task to the queue (go-delayed's signature), with the options the task carries
// (GoTask.With, PyTask.With) honoured as EnqueueContext honours them; a tracked task's handle is
// dropped (EnqueueContext returns it).
func (q *Queue) Enqueue(task Task) error {
	_, err := q.EnqueueContext(context.Background(), task)
	return err
}

// EnqueueContext enqueues a GoTask or a PyTask with its options and the options given here, which win
// over the task's own, as Python's Queue.enqueue does, and counts it in the queue's "enqueued":
//
//   - Delay or At: it waits in the queue's scheduled set until it is due (a time already past: now);
//     workers and sweepers of ours move it into the queue when it is;
//
//   - UniqueFor (and UniqueKey): an identical task (or one with the same key) is refused with
//     ErrDuplicateTask while this one waits, retries or runs, for at most UniqueFor; the lock is the
//     one a Python producer of the same call takes (see unique.go);
//
//   - ResultTTL: the task is tracked, and the handle returned reads its status and waits for its
//     result (TaskHandle); an untracked task has no handle: nil, as Python returns none.
//
//   - Expires: the blob carries the moment (ExpiresAt) past which a worker of ours never starts it.
//
// MaxRetries, Backoff, TimeLimit, the limits and Headers ride in the blob, for the worker. On a Redis Cluster the queue's
// name needs a hash tag ("{orders}"). Nothing is written when it returns an error other than Redis's.
// The queue's middleware (Use) wraps it.
func (q *Queue) EnqueueContext(ctx context.Context, task Task, options ...TaskOption) (*TaskHandle, error) {
	if q.enqueueChain != nil {
		return q.enqueueChain(ctx, task, options)
	}
	return q.enqueue(ctx, task, options)
}

// enqueue is EnqueueContext past the queue's middleware.
func (q *Queue) enqueue(ctx context.Context, task Task, options []TaskOption) (*TaskHandle, error) {
	task = withOptions(task, options)
	blob, err := task.Serialize()
	if err != nil {
		return nil, err
	}
	o := optionsOf(task)
	now := time.Now()
	if o.Expires != nil { // the blob carries the moment: expiry counts from this enqueue
		o = o.stamped(now)
		if blob, err = blobWithOptions(blob, o); err != nil {
			return nil, err
		}
	}
	if err := q.checkEnqueue(task, blob); err != nil {
		return nil, err
	}
	due := dueTime(o, now)
	switch {
	case o.UniqueFor != nil:
		return q.enqueueUnique(ctx, task, blob, o, due)
	case o.ResultTTL != nil:
		return q.enqueueTracked(ctx, task, blob, o, due)
	case due != "":
		return nil, transaction(ctx, q.conn,
			[]any{"ZADD", q.keys.key("scheduled"), due, scheduledMember(scheduledDelayed, string(blob))},
			[]any{"HINCRBY", q.keys.key("counts"), "enqueued", 1})
	}
	_, err = enqueueScript.run(ctx, q.conn, q.keys, args{"blobs": []any{blob}})
	return nil, err
}

// checkEnqueue refuses what no worker could take: a blob over maxTaskSize, or a queue on a Cluster
// whose keys would not share a slot.
func (q *Queue) checkEnqueue(task Task, blob []byte) error {
	if len(blob) > maxTaskSize {
		return fmt.Errorf("%w: %s: %d bytes is over the queue's max_task_size of %d", ErrTaskTooLarge,
			task.getFuncPath(), len(blob), maxTaskSize)
	}
	if _, tagged := hashTag(q.name); !tagged && q.onCluster() {
		return fmt.Errorf("queue '%s' has no hash tag, which a Redis Cluster needs to keep all its keys in one "+
			"slot: name it '{%s}' (braces and all, everywhere the queue is named)", q.name, q.name)
	}
	return nil
}

// onCluster says whether the queue talks to a Redis Cluster.
func (q *Queue) onCluster() bool {
	c, ok := q.conn.(clientConn)
	if !ok {
		return false
	}
	_, cluster := c.client.(*goredis.ClusterClient)
	return cluster
}

// dueTime is when a task with these options is due, as the scripts take it (unix seconds), or "" for
// now: none given, or a time already past (Python's producer.due_time).
func dueTime(o TaskOptions, now time.Time) string {
	var due time.Time
	switch {
	case !o.At.IsZero():
		due = o.At
	case o.Delay != nil:
		due = now.Add(time.Duration(*o.Delay * float64(time.Second)))
	default:
		return ""
	}
	if !due.After(now) {
		return ""
	}
	return strconv.FormatFloat(float64(due.UnixNano())/1e9, 'f', -1, 64)
}

// scheduledFor is the scheduled-set member of blob when due ("" for now).
func scheduledFor(blob []byte, due string) string {
	if due == "" {
		return ""
	}
	return scheduledMember(scheduledDelayed, string(blob))
}

// enqueueTracked enqueues the task with a fresh id in its options, and its record (enqueue_tracked.lua).
func (q *Queue) enqueueTracked(ctx context.Context, task Task, blob []byte, o TaskOptions, due string) (*TaskHandle, error) {
	o.ID = randomHex(16)
	tracked, err := blobWithOptions(blob, o)
	if err != nil {
		return nil, err
	}
	_, err = enqueueTrackedScript.run(ctx, q.conn, q.keys, args{
		"records": []any{q.keys.task(o.ID)}, "ttl": recordTTL(*o.ResultTTL), "due": due,
		"tasks": []any{task.getFuncPath(), tracked, scheduledFor(tracked, due)},
	})
	if err != nil {
		return nil, err
	}
	return q.Handle(o.ID), nil
}

// enqueueUnique takes the task's lock and enqueues it (enqueue_unique.lua): its blob carries the lock's
// key and token, so that its worker releases the lock, and the id of a tracked task.
func (q *Queue) enqueueUnique(ctx context.Context, task Task, blob []byte, o TaskOptions, due string) (*TaskHandle, error) {
	key := o.UniqueKey
	if key == "" {
		var err error
		if key, err = uniqueDigest(blob); err != nil {
			return nil, err
		}
	}
	o.UniqueKey, o.UniqueToken = key, randomHex(8)
	trackingKeys, trackingArgs := []any{}, []any{}
	if o.ResultTTL != nil {
		o.ID = randomHex(16)
		trackingKeys = []any{q.keys.key("tracked"), q.keys.task(o.ID)}
		trackingArgs = []any{task.getFuncPath(), recordTTL(*o.ResultTTL)}
	}
	locked, err := blobWithOptions(blob, o)
	if err != nil {
		return nil, err
	}
	lock := q.keys.unique(key)
	reply, err := enqueueUniqueScript.run(ctx, q.conn, q.keys, args{
		"lock": lock, "lock_ms": max(1, int64(*o.UniqueFor*1000)), "token": o.UniqueToken, "blob": locked,
		"due": due, "member": scheduledFor(locked, due), "tracking_keys": trackingKeys, "tracking_args": trackingArgs,
	})
	if err != nil {
		return nil, err
	}
	if taken, _ := reply.(int64); taken != 1 {
		return nil, fmt.Errorf("%w: %s is held by a task queued or running; it expires in %.1f s", ErrDuplicateTask,
			lock, float64(-taken)/1000)
	}
	if o.ID == "" {
		return nil, nil
	}
	return q.Handle(o.ID), nil
}

// recordTTL is ResultTTL as the whole seconds a record's expiry takes: rounded up (tracking.ttl_seconds).
func recordTTL(seconds float64) int64 {
	return int64(math.Ceil(seconds))
}
