package delayed

import (
	"log/slog"
	"sync"
	"time"
)

// Riding out a Redis outage, as Python's delayed/runtime/backoff.py does: waits that double while
// Redis fails, and the outage said once as it starts and once as it ends, however many of the
// worker's goroutines meet it (a sweeper waits as long).

const (
	outageFirstWait = 100 * time.Millisecond
	outageMaxWait   = 10 * time.Second
)

// outage is whether Redis is gone, as a worker's goroutines see it.
type outage struct {
	logger  *slog.Logger
	worker  string
	mu      sync.Mutex
	failing bool
}

func (o *outage) failed(err error) {
	o.mu.Lock()
	already := o.failing
	o.failing = true
	o.mu.Unlock()
	if !already {
		o.logger.Warn("Redis error; retrying until it is back", "worker", o.worker, "error", err)
	}
}

func (o *outage) succeeded() {
	o.mu.Lock()
	was := o.failing
	o.failing = false
	o.mu.Unlock()
	if was {
		o.logger.Warn("Redis is back", "worker", o.worker)
	}
}

// backoff is one goroutine's waits between its tries while Redis fails.
type backoff struct {
	outage  *outage
	wait    time.Duration
	failing bool
}

func newBackoff(o *outage) *backoff { return &backoff{outage: o, wait: outageFirstWait} }

// failed says the outage (once) and waits, doubling the next wait; a close of stop cuts it short.
func (b *backoff) failed(err error, stop <-chan struct{}) {
	b.failing = true
	b.outage.failed(err)
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-stop:
	}
	b.wait = min(2*b.wait, outageMaxWait)
}

func (b *backoff) succeeded() {
	if b.failing {
		b.failing = false
		b.wait = outageFirstWait
		b.outage.succeeded()
	}
}
