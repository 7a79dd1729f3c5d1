package delayed

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	defaultKeepAliveDuration = 15 * time.Second
	defaultConcurrency       = 1
	defaultBatch             = 32
	defaultSweepInterval     = 15 * time.Second
)

// WorkerOption sets a worker's option.
type WorkerOption func(*Worker)

// KeepAliveDuration sets how often the worker refreshes its keep-alive keys (0 or less: the default,
// 15 s, a quarter of the queue's KeepAliveTimeout); keep it well under the KeepAliveTimeout.
func KeepAliveDuration(d time.Duration) WorkerOption {
	return func(w *Worker) {
		if d > 0 {
			w.keepAliveDuration = d
		} else {
			w.keepAliveDuration = defaultKeepAliveDuration
		}
	}
}

// Concurrency sets how many tasks the worker runs at once, each in a goroutine of its own (under 1:
// the default, 1). The default runs one task at a time, as go-delayed's worker and Python's worker do
// by default, so that handlers written for go-delayed need no locks; raise it for handlers that wait
// on the network.
func Concurrency(n int) WorkerOption {
	return func(w *Worker) {
		w.concurrency = max(n, defaultConcurrency)
	}
}

// Batch sets the most tasks the worker claims per round trip to Redis, each under a worker id of its
// own (under 1: the default, 32, as Python's --batch). Finished tasks are released in the same round
// trip as the next claim. A worker keeps as many claimed tasks ready beyond its running ones as should
// start within 16 ms (by their mean run time), and gives the ready ones back to the queue once none
// started for 20 ms, so a slow task does not hold up others another worker could run. 1 claims one
// task at a time.
func Batch(n int) WorkerOption {
	return func(w *Worker) {
		if n < 1 {
			n = defaultBatch
		}
		w.batch = n
	}
}

// GracePeriod bounds how long a stopping worker waits for its running tasks (0 or less: the default,
// no bound, as Python's worker waits; a second stop signal ends the wait at once). A task still running
// when it ends stays held, its context cancelled: the worker does not go offline, so its keep-alive keys
// lapse and a sweeper requeues the task (it runs again).
func GracePeriod(d time.Duration) WorkerOption {
	return func(w *Worker) {
		w.grace = max(d, 0)
	}
}

// SweepInterval sets how often the worker sweeps its queue (default 15 s, as Python's workers; 0 or
// less: never), the first sweep one interval in: it requeues the tasks of dead workers (their
// keep-alive lapsed), counting their crashes, and tops up missing notifications, as a Sweeper does. Our
// workers and sweepers, Python's and Go's, sweep a queue at most once per interval between them, so a
// worker started after a crash recovers what the dead one held without a sweeper of its own.
func SweepInterval(d time.Duration) WorkerOption {
	return func(w *Worker) {
		w.sweepInterval = max(d, 0)
	}
}

// MaxCrashes sets how many times our workers may die holding a task before the worker's sweep
// dead-letters it (crash_loop); 0 counts no crashes (default: DefaultMaxCrashes, as a Sweeper's). A
// negative n is ignored.
func MaxCrashes(n int) WorkerOption {
	return func(w *Worker) {
		if n >= 0 {
			w.maxCrashes = n
		}
	}
}

// Logger sets where the worker logs (default: slog.Default()): a line as it goes online and offline,
// and one per failed task (its func, task id and error).
func Logger(logger *slog.Logger) WorkerOption {
	return func(w *Worker) {
		if logger != nil {
			w.logger = logger
		}
	}
}

// Metrics registers the worker's metrics with registerer (prometheus.DefaultRegisterer, or a registry
// of your own): delayed_tasks_total{queue,function,outcome} and
// delayed_task_duration_seconds{queue,function}, the names and labels Python's workers use. Workers
// of one process may share a registerer. Serve it with promhttp.
func Metrics(registerer prometheus.Registerer) WorkerOption {
	return func(w *Worker) {
		w.metrics = newTaskMetrics(registerer)
	}
}
