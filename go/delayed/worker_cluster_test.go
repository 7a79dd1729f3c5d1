package delayed

import (
	"context"
	"testing"
	"time"
)

func TestTheWorkerRunsAQueueOnARedisCluster(t *testing.T) {
	resetHandlers()
	cluster := startCluster(t)
	client, err := Connect(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	q := NewQueueWithClient("{orders}", client)
	ctx := context.Background()
	var handles []*TaskHandle
	for i := 0; i < 20; i++ {
		handles = append(handles, enqueueTracked(t, q, NewGoTaskOfFunc(addNumbers, i, i), ResultTTL(time.Minute)))
	}
	if _, err := q.EnqueueContext(ctx, NewGoTaskOfFunc(failAlways, "clustered").With(MaxRetries(1), Backoff(0))); err != nil {
		t.Fatal(err)
	}
	w := newTestWorker(t, q, Concurrency(4))
	w.RegisterHandlers(addNumbers, failAlways)
	stop := runWorker(t, w)
	for i, handle := range handles {
		result, err := handle.Result(ctx)
		var sum int
		if err != nil || result.Decode(&sum) != nil || sum != 2*i {
			t.Fatalf("task %d: %d (%v)", i, sum, err)
		}
	}
	node := cluster.primaryFor(t, q.keys.key("dead_letters"))
	waitFor(t, "the failing task's dead letter, after its retry", func() bool {
		return node.Client.XLen(ctx, q.keys.key("dead_letters")).Val() == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if held := node.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d tasks held after a clean stop", held)
	}
	if alive := node.Client.Exists(ctx, w.ID()).Val(); alive != 0 {
		t.Error("the worker is still online after a clean stop")
	}
}
