package delayed

import "context"

// Dequeue waits up to the queue's DequeueTimeout for a task and holds it under the id of the worker
// NewWorker made for this queue (go-delayed's): nil, nil if none came. A task the worker's id still
// holds (the reply to its last claim was lost) comes back again. A blob that is no GoTask is
// returned as an error and stays held: release it (Release) or let a sweeper requeue it.
// Call the worker's KeepAlive first, so that its id is alive while it holds the task.
func (q *Queue) Dequeue() (*GoTask, error) {
	ctx := context.Background()
	_, notified, err := q.conn.blpop(ctx, q.dequeueTimeout, q.keys.key("noti"))
	if err != nil || !notified {
		return nil, err
	}
	reply, err := dequeueScript.run(ctx, q.conn, q.keys, args{"worker_id": q.workerID})
	if err != nil {
		return nil, err
	}
	blob, ok := reply.(string)
	if !ok {
		return nil, nil
	}
	return DeserializeGoTask([]byte(blob))
}

// Release releases the task Dequeue gave (go-delayed's): it is done, and counted (a tracked one's
// record is left as it is: Worker.Run writes results).
func (q *Queue) Release() error {
	_, err := claimBatchScript.run(context.Background(), q.conn, q.keys, args{
		"info": q.keys.workerInfo(q.workerID), "records": []any{}, "released_count": 1, "tracked_count": 0,
		"unnoted_count": 0, "released": []any{q.workerID}, "results": []any{}, "unnoted": []any{}, "claim_ids": []any{},
	})
	return err
}
