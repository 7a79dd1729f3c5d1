package delayed

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// What a worker does with one claimed task: decode it, find its handler, admit it under its limits
// (limits.go), call it within its time limit, settle it (settle.go), count it and log a failure.

// prepare decodes the run's blob, or refuses it (too_large, malformed, py_task), or refuses a GoTask
// whose expiry passed (expired): the first check after the one decode each claimed task gets, before
// its handler is looked up, so an expired task is never called whatever it names.
func (w *Worker) prepare(r *run) {
	if len(r.blob) > maxTaskSize {
		r.refuse(ReasonTooLarge, fmt.Sprintf("%d bytes, over %d", len(r.blob), maxTaskSize))
		return
	}
	task, err := decodeTask([]byte(r.blob))
	var malformed *MalformedTaskError
	switch {
	case errors.As(err, &malformed):
		r.funcPath = malformed.FuncPath
		r.refuse(malformed.Reason, malformed.Error())
		return
	case err != nil:
		r.refuse(ReasonMalformed, err.Error())
		return
	}
	switch t := task.(type) {
	case *GoTask:
		r.task, r.options, r.funcPath = t, t.options, t.raw.FuncPath
		if at := t.options.ExpiresAt; at != nil {
			if now := time.Now(); float64(now.UnixNano())/1e9 >= *at {
				r.refuse(ReasonExpired, expiredError(*at, now))
			}
		}
	case *PyTask:
		r.options, r.funcPath = t.options, t.raw.FuncPath
		r.refuse(ReasonPyTask, fmt.Sprintf("a PyTask for '%s': only a Python worker can run it", t.raw.FuncPath)) // as Python words a GoTask's
	}
}

// invoke calls the run's handler with its payload within the task's time limit, or refuses it
// (not_allowed: no handler; bad_arguments: the payload does not fit its parameters), or, once the
// arguments fit, admit says its limits hold it back (false): it is not called.
//
// A handler past its time limit has its context's deadline pass, and its task is failed at once as
// timed out, whether or not the handler returns: one that ignores its context is abandoned, still
// running (its slot runs the next task), its result dropped when it returns.
//
// A tracked task's handler has its context cancelled with ErrCancelled when the task's cancel is heard
// (cancels.go), and is not called at all if it was heard before; the run is cancelled either way.
func (w *Worker) invoke(ctx context.Context, r *run, payload []byte, admit func(*run) bool) {
	r.handler = w.handler(r.funcPath)
	if r.handler == nil {
		r.refuse(ReasonNotAllowed, fmt.Sprintf("no handler is registered for %s", r.funcPath))
		return
	}
	if r.options.ID != "" {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		if !w.cancels.starting(r.options.ID, cancel) {
			r.cancelled = true
			return
		}
		defer w.cancels.stopped(r.options.ID)
		defer func() { r.cancelled = errors.Is(context.Cause(ctx), ErrCancelled) }()
	}
	if r.options.TimeLimit != nil {
		r.limit = *r.options.TimeLimit
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.limit*float64(time.Second)))
		defer cancel()
	}
	var c *Call
	if w.next != nil || r.handler.withCtx { // someone may ask CallFrom
		ctx, c = r.callOf(ctx)
	}
	args, err := r.handler.arguments(ctx, payload)
	if err != nil {
		r.refuse(ReasonBadArguments, err.Error())
		return
	}
	if !admit(r) {
		return
	}
	r.args = args
	started := time.Now()
	if r.limit == 0 {
		r.value, r.err, r.stack = w.call(ctx, r, c)
		r.seconds = time.Since(started).Seconds()
		return
	}
	type outcome struct {
		value any
		err   error
		stack string
	}
	finished := make(chan outcome, 1) // a handler abandoned past its time limit sends here as it returns, unread
	go func() {
		value, err, stack := w.call(ctx, r, c)
		finished <- outcome{value, err, stack}
	}()
	select {
	case done := <-finished:
		r.value, r.err, r.stack = done.value, done.err, done.stack
		r.timedOut = r.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) { // the worker's own context: its grace period ended
			done := <-finished
			r.value, r.err, r.stack = done.value, done.err, done.stack
			break
		}
		r.err, r.timedOut = context.DeadlineExceeded, true
	}
	r.seconds = time.Since(started).Seconds()
}

// call calls the run's handler with its arguments, through the worker's middleware (c: the run's
// Call): its value and error, or a panic of either as an error with the goroutine's stack.
func (w *Worker) call(ctx context.Context, r *run, c *Call) (value any, err error, stack string) {
	defer func() {
		if p := recover(); p != nil {
			value, err, stack = nil, fmt.Errorf("panic: %v", p), string(debug.Stack())
		}
	}()
	if w.next == nil {
		value, err = r.handler.outcome(r.handler.call(r.args))
	} else {
		value, err = w.next(ctx, c)
	}
	return value, err, ""
}

// process runs one claimed task and settles it with settle (false: dropped, the worker is gone).
func (w *Worker) process(ctx context.Context, h *holding, c *claim, settle func(*claim, settlement) bool) {
	r := &run{queue: h.queue, blob: c.blob, workerID: c.id}
	w.prepare(r)
	if r.refusal == nil {
		w.invoke(ctx, r, r.task.raw.Payload, func(r *run) bool { return w.admit(ctx, h, c, r) })
	}
	s := decide(r, h.mainID(), time.Now())
	if !settle(c, s) {
		return
	}
	if w.metrics != nil {
		w.metrics.observe(h.queue.name, r.funcPath, s.outcome, r.seconds)
	}
	switch s.outcome {
	case outcomeDone:
	case outcomeCancelled:
		w.logger.Info("task cancelled: its cancel was requested while it was held", "func", r.funcPath,
			"task", r.options.ID, "queue", r.queue.name)
	default:
		w.logFailure(r, s)
	}
}

// logFailure is the one line of a run that failed or was refused: how it is retried, or where its
// letter went.
func (w *Worker) logFailure(r *run, s settlement) {
	attrs := []any{"func", r.funcPath, "task", taskLabel(r.options), "queue", r.queue.name}
	switch s.kind {
	case settleReschedule:
		w.logger.Error("task failed; retrying", append(attrs, "attempt", r.options.Attempt+1,
			"of", *r.options.MaxRetries+1, "next_in", max(0, time.Until(time.Unix(0, int64(s.due*1e9)))).Round(time.Millisecond),
			"error", oneLine(r.errorText(), maxLetterError))...)
	case settleBury:
		var message string
		if r.refusal != nil {
			message = r.refusal.message
		} else {
			message = oneLine(r.errorText(), maxLetterError)
		}
		w.logger.Error("task dead-lettered", append(attrs, "reason", s.reason, "dead_letters",
			r.queue.keys.key("dead_letters"), "error", message)...)
	}
}

// taskLabel is how a log line names a task: its id if tracked, else "-".
func taskLabel(options TaskOptions) string {
	if options.ID != "" {
		return options.ID
	}
	return "-"
}
