package delayed

import (
	"context"
	"sync"
	"time"
)

// A running worker's background duties besides its keep-alive, each in a goroutine of its own.

// startBackground starts moving due tasks and sweeping the queue (as a Sweeper of the queue does, with
// the worker's interval, max crashes and logger), and noting long claims; the function it returns stops them.
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
	sweeper := NewSweeper(w.queue)
	sweeper.SetInterval(w.sweepInterval)
	sweeper.SetMaxCrashes(w.maxCrashes)
	sweeper.SetLogger(w.logger)
	nextSweep := time.Now().Add(w.sweepInterval)
	every(moveDueInterval, func(ctx context.Context) error { // Python's worker moves due tasks and sweeps too
		sweeping := w.sweepInterval > 0 && !time.Now().Before(nextSweep)
		if err := sweeper.round(ctx, sweeping); err != nil {
			return err
		}
		if sweeping {
			nextSweep = time.Now().Add(w.sweepInterval)
		}
		return nil
	})
	every(noteAfter, w.hold.noteClaims)
	return func() {
		close(quit)
		running.Wait()
	}
}
