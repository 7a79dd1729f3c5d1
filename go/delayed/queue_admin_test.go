package delayed

import (
	"context"
	"testing"
	"time"
)

func TestClearRemovesTheQueuesTasksTheirRecordsAndLocksAndKeepsTheRest(t *testing.T) {
	server := startRedis(t)
	ctx := context.Background()
	queue := NewQueue("q", NewRedisPool(server.Addr))
	queue.workerID = "0123456789abcdef0123456789abcdef" // go-delayed's worker on this Queue: its keep-alive key
	server.Client.Set(ctx, queue.workerID, 1, 0)
	task := NewPyTask("tasks:add", []int{1, 2}, nil)
	if err := queue.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	const buried = "delayed-py-ffffffffffffffffffffffffffffffff"
	buryAs(t, queue, buried, claimAs(t, queue, buried), "", "", "") // a dead letter: no task of the queue's
	var handles []*TaskHandle
	for _, options := range [][]TaskOption{{ResultTTL(time.Hour)}, {Delay(time.Hour)},
		{ResultTTL(time.Hour), Delay(time.Hour)}, {UniqueFor(time.Hour), UniqueKey("k")}} {
		handle, err := queue.EnqueueContext(ctx, task, options...)
		if err != nil {
			t.Fatal(err)
		}
		if handle != nil {
			handles = append(handles, handle)
		}
	}
	claimAs(t, queue, testWorker) // the first tracked task: held
	handles = append(handles, trackedTask(t, queue))
	server.Client.Set(ctx, "q_unnotified", "x", 0)
	server.Client.Set(ctx, "q_head_since", "x", 0)
	if err := queue.Clear(); err != nil {
		t.Fatal(err)
	}
	gone := []string{"q", "q_noti", "q_processing", "q_scheduled", "q_unnotified", "q_head_since", "q_unique:k", queue.workerID}
	for _, handle := range handles {
		gone = append(gone, "q_task:"+handle.ID())
	}
	if left := server.Client.Exists(ctx, gone...).Val(); left != 0 {
		t.Fatalf("%d of %q left", left, gone)
	}
	if server.Client.XLen(ctx, "q_dead_letters").Val() != 1 || server.Client.HGet(ctx, "q_counts", "enqueued").Val() != "6" {
		t.Fatal("the dead letters or the counts went too")
	}
	if n, err := queue.Len(); n != 0 || err != nil {
		t.Fatalf("Len %d, %v", n, err)
	}
}
