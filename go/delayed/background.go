package delayed

import (
	"context"
	"sync"
	"time"
)

// A running worker's background duties besides its keep-alive, each in a goroutine of its own.

var moveDueScript = loadScript("move_due")

const (
	// moveDueInterval is how often a worker moves the due tasks of its queue's scheduled set (delays,
	// retries' backoff) into the queue: how late a due task may start (Python's MOVE_DUE_INTERVAL).
	moveDueInterval = 500 * time.Millisecond
	// moveDueLimit is the most tasks one move_due call moves, so a burst never blocks Redis for long.
	moveDueLimit = 1000
)

// startBackground starts moving due tasks and noting long claims; the function it returns stops them.
func (w *Worker) startBackground() (stop func()) {
	quit := make(chan struct{})
	var running sync.WaitGroup
	every := func(interval time.Duration, duty func(context.Context) error) {
		running.Add(1)
		go func() {
			defer running.Done()
			wait := newBackoff(w.outage)
			ticker := time.NewTicker(interval)
			defer ticker.Stop()
			for {
				select {
				case <-quit:
					return
				case <-ticker.C:
				}
				if err := duty(context.Background()); err != nil {
					wait.failed(err, quit)
				} else {
					wait.succeeded()
				}
			}
		}()
	}
	every(moveDueInterval, w.queue.moveDue)
	every(noteAfter, w.hold.noteClaims)
	return func() {
		close(quit)
		running.Wait()
	}
}

// moveDue moves every due task of the scheduled set into the queue, with its notification,
// moveDueLimit a call (delayed/runtime/due.py's move_due_tasks).
func (q *Queue) moveDue(ctx context.Context) error {
	for {
		now := secondsArg(float64(time.Now().UnixNano()) / 1e9)
		moved, err := moveDueScript.run(ctx, q.conn, q.keys, args{"now": now, "limit": moveDueLimit})
		if err != nil || moved != int64(moveDueLimit) {
			return err
		}
	}
}
