package delayed

import (
	"context"
)

// clearChunk is how many blobs Clear reads per command, and how many keys it deletes per DEL.
const clearChunk = 1000

// Len returns the task count of the queue (go-delayed's): the tasks waiting in it, not those
// scheduled for later or held by workers.
func (q *Queue) Len() (count int, err error) {
	reply, err := q.conn.do(context.Background(), "LLEN", q.name)
	n, _ := reply.(int64)
	return int(n), err
}

// Clear removes the queue's tasks from Redis (go-delayed's Clear): those waiting (the queue and its
// notifications), held by workers (the processing hash), and scheduled; the notifications' bookkeeping;
// the keep-alive key of the worker on this Queue, if any; and the records and unique locks of the
// tracked and unique tasks among them, which would otherwise wait for tasks that are gone. It keeps
// what is not a task: the dead letters (`delayed dead purge` empties them), the counts, a pause, the
// periodic ticks and our workers' descriptions. A task enqueued while it runs may lose its blob and
// keep its record or lock (which then expires as it would have).
func (q *Queue) Clear() error {
	ctx := context.Background()
	keys := []any{q.name, q.keys.key("noti"), q.keys.key("processing"), q.keys.key("scheduled"),
		q.keys.key("unnotified"), q.keys.key("head_since")}
	held, err := q.conn.do(ctx, "HVALS", q.keys.key("processing"))
	if err != nil {
		return err
	}
	keys = appendTaskKeys(keys, q.keys, held, 0)
	for _, list := range []struct {
		command, key string
		nonce        int
	}{{"LRANGE", q.name, 0}, {"ZRANGE", q.keys.key("scheduled"), scheduledPrefixBytes}} {
		for start := 0; ; start += clearChunk {
			blobs, err := q.conn.do(ctx, list.command, list.key, start, start+clearChunk-1)
			if err != nil {
				return err
			}
			keys = appendTaskKeys(keys, q.keys, blobs, list.nonce)
			if items, _ := blobs.([]any); len(items) < clearChunk {
				break
			}
		}
	}
	for start := 0; start < len(keys); start += clearChunk {
		command := append([]any{"DEL"}, keys[start:min(start+clearChunk, len(keys))]...)
		if _, err := q.conn.do(ctx, command...); err != nil {
			return err
		}
	}
	if q.workerID != "" { // go-delayed's keep-alive key: not in the queue's slot
		_, err = q.conn.do(ctx, "DEL", q.workerID)
	}
	return err
}

// appendTaskKeys adds the record and unique lock of each tracked or unique task among blobs (a reply
// of blobs, each after nonce bytes).
func appendTaskKeys(keys []any, queue *queueKeys, blobs any, nonce int) []any {
	items, _ := blobs.([]any)
	for _, item := range items {
		blob, _ := item.(string)
		if len(blob) <= nonce {
			continue
		}
		task, err := decodeTask([]byte(blob[nonce:]))
		if err != nil {
			continue
		}
		o := optionsOf(task)
		if o.ID != "" {
			keys = append(keys, queue.task(o.ID))
		}
		if o.UniqueKey != "" && o.UniqueToken != "" {
			keys = append(keys, queue.unique(o.UniqueKey))
		}
	}
	return keys
}
