package delayed

import (
	"context"
	"errors"
	"reflect"
)

// Middleware around a task's call in a worker (WithMiddleware) and around an enqueue (Queue.Use), the
// Go side of Python's delayed.Middleware: the same hook points, in asynq's ServeMux.Use shape, where one
// function wraps the rest of the call and so runs before it, after it, around it and on its error.

// Call is a task a worker runs, as its middleware and its handler see it: CallFrom(ctx) gives it to
// code running in the call, as Python's delayed.current() does.
type Call struct {
	FuncPath string            // the handler's name (FuncPath)
	ID       string            // a tracked task's id ("" untracked)
	Queue    string            // the queue's name
	WorkerID string            // the worker id the task is held under ("" under Execute)
	Attempt  int               // runs of the task that failed before this one (with MaxRetries)
	Headers  map[string]string // what its producer sent with it (Header): tracing's traceparent; nil if none
	Task     *GoTask           // the decoded task

	run *run // the worker's run of it: what the innermost Next calls
}

// Next runs the rest of a task's call, the middleware after this one and then the handler, and returns
// what the handler returned (or what a middleware inside made of it). The handler gets the ctx passed to
// the Next that calls it (its context.Context parameter). Pass on the Call a middleware got (a copy of
// it will do): the handler is not called for a Call made anew, whose run returns an error instead.
type Next func(ctx context.Context, call *Call) (any, error)

// Middleware wraps a task's call: code before it calls next runs before the call, code after it once
// the call returned; the error it returns is the call's (a task that fails is retried or dead-lettered
// as its options say), so one that returns an error without calling next keeps the handler from running.
// It may pass next a ctx of its own making (values, a tracing span), which the handler receives; a
// panic in it is recovered as a handler's is. The worker composes its middleware once, as it is made.
type Middleware func(next Next) Next

// WithMiddleware wraps every task's call in mw, the first given outermost, after any given before. It
// runs once the task is decoded, its handler found and its payload decoded into the handler's arguments
// (a task refused before its call, such as not_allowed or bad_arguments, goes through none), within the
// task's time limit (ctx carries its deadline).
func WithMiddleware(mw ...Middleware) WorkerOption {
	return func(w *Worker) {
		w.middleware = append(w.middleware, mw...)
	}
}

// callKey is the context key of the running task's Call.
type callKey struct{}

// CallFrom is the Call of the task whose call ctx (or a context made from it) belongs to: in a
// worker's middleware and its handler, and in what they call with it, such as an enqueue, whose
// middleware can read the running task from its ctx. False outside a task's call.
func CallFrom(ctx context.Context) (*Call, bool) {
	call, ok := ctx.Value(callKey{}).(*Call)
	return call, ok
}

// errForeignCall is what the handler's Next returns when a middleware passed it a Call it made itself.
var errForeignCall = errors.New("delayed: a middleware passed next a Call of its own making: pass on the one it got")

// callOf is the Call of a run, in ctx.
func (r *run) callOf(ctx context.Context) (context.Context, *Call) {
	call := &Call{FuncPath: r.funcPath, ID: r.options.ID, Queue: r.queue.name, WorkerID: r.workerID,
		Attempt: r.options.Attempt, Headers: r.options.Headers, Task: r.task, run: r}
	return context.WithValue(ctx, callKey{}, call), call
}

// callHandler is the innermost Next: the run's handler, with the arguments its payload decoded into
// and the ctx it was passed.
func callHandler(ctx context.Context, call *Call) (any, error) {
	r := call.run
	if r == nil {
		return nil, errForeignCall
	}
	if r.handler.withCtx {
		r.args[0] = reflect.ValueOf(&ctx).Elem()
	}
	return r.handler.outcome(r.handler.call(r.args))
}

// chain composes middleware around next, the first outermost.
func chain(middleware []Middleware, next Next) Next {
	for i := len(middleware) - 1; i >= 0; i-- {
		next = middleware[i](next)
	}
	return next
}

// EnqueueNext enqueues a task with options (the rest of an enqueue: the middleware after this one, then
// the write), as EnqueueContext does.
type EnqueueNext func(ctx context.Context, task Task, options []TaskOption) (*TaskHandle, error)

// EnqueueMiddleware wraps an enqueue: it may change the task or add options (Header("traceparent",
// ...)), run code before and after it, and see its handle or error. ctx is the enqueue's: a handler
// that enqueues with its own ctx lets a middleware read the running task (CallFrom) and its span.
type EnqueueMiddleware func(next EnqueueNext) EnqueueNext

// Use wraps the queue's enqueues (EnqueueContext, Enqueue) in mw, the first given outermost, after any
// given before. Call it before the queue enqueues: it is not safe while an enqueue runs.
func (q *Queue) Use(mw ...EnqueueMiddleware) {
	q.enqueueMiddleware = append(q.enqueueMiddleware, mw...)
	next := EnqueueNext(q.enqueue)
	for i := len(q.enqueueMiddleware) - 1; i >= 0; i-- {
		next = q.enqueueMiddleware[i](next)
	}
	q.enqueueChain = next
}
