package delayed

import (
	"context"
	"errors"
	"sync"
)

// Cancelling a running task, in the worker (Python's delayed/worker/cancels.py): the cancel of a tracked
// task a worker holds is requested in its record and its id published on the queue's cancels channel
// (tracking.lua's track.cancel). The worker listens on a connection of its own: the handler of a task it
// runs has its context cancelled, with ErrCancelled as its cause; a task claimed but not started is not
// called. However the handler returns, the task is settled cancelled, and the script that ends it reads
// the request in its record: a worker that missed the message (its connection was down) still ends the
// task cancelled, once the handler returns.

// ErrCancelled is the cause (context.Cause) of a handler's context once its task's cancel was requested
// (TaskHandle.Cancel, Python's handle.cancel(), `delayed cancel ID`): the handler should return. Whatever
// it returns then, the task ends cancelled, its result not kept, never retried.
var ErrCancelled = errors.New("delayed: the task's cancel was requested")

// rememberedCancels is how many heard ids a worker keeps, so that a task claimed before its cancel was
// heard, but not started yet, is not called.
const rememberedCancels = 10000

// cancels is what a worker knows of the cancels of its tracked tasks: the calls being made, by task id,
// and the ids it heard. Its methods may be called from any goroutine.
type cancels struct {
	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	heard   map[string]bool
	order   []string // the heard ids, oldest first
}

func newCancels() *cancels {
	return &cancels{running: map[string]context.CancelCauseFunc{}, heard: map[string]bool{}}
}

// starting is called before a tracked task's call, with what cancels the call's context: false if its
// cancel was heard already (the call must not be made), else the call can be reached until stopped(id).
func (c *cancels) starting(id string, cancel context.CancelCauseFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heard[id] {
		return false
	}
	c.running[id] = cancel
	return true
}

// stopped is called after a tracked task's call.
func (c *cancels) stopped(id string) {
	c.mu.Lock()
	delete(c.running, id)
	c.mu.Unlock()
}

// hear takes a published cancel: the id is remembered, and the call being made for it, if any, has its
// context cancelled with ErrCancelled.
func (c *cancels) hear(id string) {
	c.mu.Lock()
	if !c.heard[id] {
		c.heard[id] = true
		c.order = append(c.order, id)
		if len(c.order) > rememberedCancels {
			delete(c.heard, c.order[0])
			c.order = c.order[1:]
		}
	}
	cancel := c.running[id]
	c.mu.Unlock()
	if cancel != nil {
		cancel(ErrCancelled)
	}
}

// listenForCancels hears the cancels published on the queue's channel, on a connection of its own, until
// the function it returns is called; a Redis error is ridden out as the worker's other goroutines ride
// theirs, then it subscribes again (a message published meanwhile is missed: see above). It returns once
// its first subscription is made (or failed), so that the worker does not miss the cancel of a task it
// runs from its start.
func (w *Worker) listenForCancels() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done, tried := make(chan struct{}), make(chan struct{})
	var once sync.Once
	triedOnce := func() { once.Do(func() { close(tried) }) }
	go func() {
		defer close(done)
		defer triedOnce()
		wait := newBackoff(w.outage)
		subscribed := func() {
			triedOnce()
			wait.succeeded()
		}
		for {
			err := w.queue.conn.subscribe(ctx, w.queue.keys.key("cancels"), subscribed, w.cancels.hear)
			if ctx.Err() != nil {
				return
			}
			triedOnce()
			wait.failed(err, ctx.Done())
		}
	}()
	<-tried
	return func() {
		cancel()
		<-done
	}
}
