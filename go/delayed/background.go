package delayed

import (
	"context"
	"sync"
	"time"
)

// A running worker's background duties besides its keep-alive, each in a goroutine of its own.

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
	every(moveDueInterval, w.queue.moveDue) // as sweepers do: Python's worker does it too
	every(noteAfter, w.hold.noteClaims)
	return func() {
		close(quit)
		running.Wait()
	}
}
