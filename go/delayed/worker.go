package delayed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// A worker's status (go-delayed's): Status returns one of these.
const (
	StatusStopped uint32 = iota
	StatusRunning
	StatusStopping
)

// ErrTasksLeftRunning is what RunContext returns when its grace period ended with tasks still
// running: they stay held, and a sweeper requeues them once the worker's keep-alive keys lapse.
var ErrTasksLeftRunning = errors.New("delayed: tasks still ran when the grace period ended; left for a sweeper")

// Worker runs GoTasks from a queue with the handlers registered for them, as our Python worker runs
// PyTasks, on the same keys and Lua scripts: a Python process looking at Redis sees it as one of ours.
//
// It claims a batch of tasks per round trip to Redis (Batch), each under a worker id of its own,
// runs up to Concurrency of them at once, and settles each: a task whose handler returned is released
// (in the next claim's round trip), one that failed (an error, a panic, its time limit) is retried
// with backoff as its options say (MaxRetries, Backoff), and the rest go to the queue's dead letters
// with the reason Python's worker gives: no handler (not_allowed), a payload the handler's parameters do
// not take (bad_arguments), a PyTask (py_task), a blob that is no task (malformed) or over 1 MiB
// (too_large), no retries left (failed, timed_out). A task's TimeLimit is its handler's context
// deadline: past it the task fails at once as timed out, and a handler that ignores its context is
// abandoned, still running, its result dropped. A tracked task's record gets its result (the msgpack of
// the handler's value, a struct as a map of its field names) or its error, as Python's TaskHandle reads it.
// The cancel of a tracked task it runs (TaskHandle.Cancel, Python's handle.cancel(), `delayed cancel ID`)
// cancels its handler's context, with ErrCancelled as the cause; the task ends cancelled, whatever the
// handler returns, never retried.
//
// While it runs, it refreshes its keep-alive keys (KeepAliveDuration), moves due scheduled tasks (a
// delay, a retry's backoff) into its queue twice a second, sweeps the queue (SweepInterval: the tasks
// of dead workers go back to it), and notes which tasks it has held a while.
// A stop (Stop, a cancelled RunContext, or SIGTERM, SIGINT or SIGHUP under Run) ends the claims:
// claimed tasks it has not started go back to the head of the queue, the running ones finish within
// the GracePeriod and are released, and the worker goes offline. Nothing runs twice after a clean stop.
type Worker struct {
	id                string // the main id: its keep-alive key and description are named after it
	queue             *Queue
	keepAliveDuration time.Duration
	concurrency       int
	batch             int
	grace             time.Duration
	sweepInterval     time.Duration
	maxCrashes        int
	logger            *slog.Logger
	metrics           *taskMetrics
	cancels           *cancels
	middleware        []Middleware
	next              Next // the middleware around the handler's call, composed once (nil: none)

	handlersMu sync.RWMutex
	handlers   map[string]*Handler

	status  atomic.Uint32
	hold    *holding
	outage  *outage
	life    sync.Mutex    // guards the fields of one run below
	stop    chan struct{} // closed by Stop
	force   chan struct{} // closed when the grace period is cut short (a second stop signal)
	online  bool
	refresh chan struct{} // closed to end the keep-alive's refreshes (Die)
	done    chan struct{} // closed once the refreshes ended
}

// NewWorker creates a worker of the queue. Its ids are made now: the queue's Dequeue and Release (go-delayed's)
// hold tasks under its main id.
func NewWorker(queue *Queue, options ...WorkerOption) *Worker {
	w := &Worker{
		queue:             queue,
		keepAliveDuration: defaultKeepAliveDuration,
		concurrency:       defaultConcurrency,
		batch:             defaultBatch,
		sweepInterval:     defaultSweepInterval,
		maxCrashes:        DefaultMaxCrashes,
		logger:            slog.Default(),
		handlers:          map[string]*Handler{},
		cancels:           newCancels(),
	}
	for _, option := range options {
		option(w)
	}
	if len(w.middleware) > 0 {
		w.next = chain(w.middleware, callHandler)
	}
	// as many ids as tasks it may hold at once (running, and claimed ahead), and as many again: a
	// released id is claimed with only after its release went out
	w.hold = newHolding(queue, 2*(w.concurrency+w.batch))
	w.id = w.hold.mainID()
	queue.workerID = w.id
	w.outage = &outage{logger: w.logger, worker: w.id}
	return w
}

// ID is the worker's main id; its other ids are this id with -1, -2, ... before the queue's suffix.
func (w *Worker) ID() string { return w.id }

// Status is where the worker is: StatusStopped, StatusRunning or StatusStopping.
func (w *Worker) Status() uint32 { return w.status.Load() }

// RegisterHandlers registers functions as handlers of the tasks named after them (FuncPath). A task
// whose function has no handler is dead-lettered (reason not_allowed). A value that is no named
// function is logged and skipped.
func (w *Worker) RegisterHandlers(funcs ...interface{}) {
	w.handlersMu.Lock()
	defer w.handlersMu.Unlock()
	for _, f := range funcs {
		if h := NewHandler(f); h != nil {
			w.handlers[h.path] = h
		} else {
			w.logger.Warn("not a valid handler: a named function is needed", "value", fmt.Sprintf("%#v", f))
		}
	}
}

func (w *Worker) handler(funcPath string) *Handler {
	w.handlersMu.RLock()
	defer w.handlersMu.RUnlock()
	return w.handlers[funcPath]
}

// Run runs the worker until it is stopped: by Stop, or by SIGTERM, SIGINT or SIGHUP, which it takes
// while it runs (a second one ends the grace period at once). See RunContext.
func (w *Worker) Run() {
	stopSignals := w.takeSignals()
	defer stopSignals()
	if err := w.RunContext(context.Background()); err != nil {
		w.logger.Error("worker stopped", "worker", w.id, "error", err)
	}
}

// RunContext runs the worker until ctx is done or Stop is called; it takes no signals (use
// signal.NotifyContext). It returns nil after a clean stop, ErrTasksLeftRunning if tasks still ran when
// the grace period ended, or the error of a run it could not start (it is running already).
func (w *Worker) RunContext(ctx context.Context) error {
	if !w.status.CompareAndSwap(StatusStopped, StatusRunning) {
		return errors.New("delayed: the worker is running already")
	}
	defer w.status.Store(StatusStopped)
	w.life.Lock()
	w.stop, w.force = make(chan struct{}), make(chan struct{})
	w.life.Unlock()
	stopped := context.AfterFunc(ctx, w.Stop)
	defer stopped()

	w.life.Lock()
	online := w.online // KeepAlive was called before
	w.life.Unlock()
	if !online && !w.goOnline() {
		return nil // stopped before Redis could be reached
	}
	w.startKeepAlive()
	defer w.Die()
	background := w.startBackground()
	listening := w.listenForCancels()
	w.handlersMu.RLock()
	handlers := len(w.handlers)
	w.handlersMu.RUnlock()
	w.logger.Info("worker online", "worker", w.id, "queue", w.queue.name, "concurrency", w.concurrency,
		"handlers", handlers)
	left := newDispatcher(w).run()
	listening()
	background()
	if left > 0 {
		return fmt.Errorf("%w: %d", ErrTasksLeftRunning, left)
	}
	return nil
}

// Stop asks the worker to stop: it claims no more tasks, gives back the claimed ones it has not
// started, lets the running ones finish within the grace period, and goes offline; Run returns then.
func (w *Worker) Stop() {
	w.life.Lock()
	defer w.life.Unlock()
	if w.status.CompareAndSwap(StatusRunning, StatusStopping) {
		w.logger.Info("worker stopping: no more claims; running tasks finish", "worker", w.id)
		close(w.stop)
	}
}

// cutGrace ends the grace period at once: the running tasks are left held for a sweeper.
func (w *Worker) cutGrace() {
	w.life.Lock()
	defer w.life.Unlock()
	select {
	case <-w.force:
	default:
		close(w.force)
	}
}

// Execute runs a task here and now with its handler (no Redis: nothing is claimed, settled or
// retried, nor are its limits asked), and logs how it failed, if it did. A task without a handler, or whose payload does not fit
// the handler, is logged and not called.
func (w *Worker) Execute(t *GoTask) {
	if _, err := t.Serialize(); err != nil { // a task made here has its payload made then
		w.logger.Error("task not run", "func", t.FuncPath(), "error", err)
		return
	}
	r := &run{queue: w.queue, task: t, options: t.options, funcPath: t.FuncPath()}
	w.invoke(context.Background(), r, t.raw.Payload, func(*run) bool { return true }) // nothing claimed: no limits
	if r.refusal != nil {
		w.logger.Error("task not run", "func", r.funcPath, "task", taskLabel(r.options), "reason", r.refusal.reason,
			"error", r.refusal.message)
	} else if r.err != nil {
		w.logger.Error("task failed", "func", r.funcPath, "task", taskLabel(r.options), "error",
			oneLine(r.errorText(), maxLetterError))
	}
}
