package delayed

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The worker's metrics, as delayed/worker/metrics.py declares them for Python's workers (names,
// labels, help and buckets: a cross-language test compares them).
const (
	tasksMetricName    = "delayed_tasks_total"
	durationMetricName = "delayed_task_duration_seconds"
	tasksMetricHelp    = "Tasks settled by workers, one outcome each: done (returned), retried (raised, runs again), failed " +
		"(raised or rejected its arguments; dead-lettered), dead (dead-lettered without running: malformed, " +
		"go_task or py_task (the other language's task), too_large, not_allowed; function \"\"), held (its " +
		"rate_limit or concurrency_limit held it back at its start: it runs later, counted again then), " +
		"cancelled (its cancel was requested while the worker held it)"
	durationMetricHelp = "Run time of the tasks that ran (done, retried, failed, cancelled)"
)

// durationBuckets are seconds: from a no-op task (100 µs) to ten minutes.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0}

// taskMetrics counts each task's outcome and times each run, by queue and function (function "" for
// a dead one, so a flood of junk tasks cannot grow the label set).
type taskMetrics struct {
	tasks    *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu        sync.Mutex
	counters  map[[3]string]prometheus.Counter // labelled children, looked up once each
	observers map[[2]string]prometheus.Observer
}

func newTaskMetrics(registerer prometheus.Registerer) *taskMetrics {
	m := &taskMetrics{
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: tasksMetricName, Help: tasksMetricHelp},
			[]string{"queue", "function", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: durationMetricName, Help: durationMetricHelp,
			Buckets: durationBuckets}, []string{"queue", "function"}),
		counters:  map[[3]string]prometheus.Counter{},
		observers: map[[2]string]prometheus.Observer{},
	}
	m.tasks = register(registerer, m.tasks)
	m.duration = register(registerer, m.duration)
	return m
}

// register registers a collector, or takes the one of the same name a worker before registered there.
func register[C prometheus.Collector](registerer prometheus.Registerer, collector C) C {
	err := registerer.Register(collector)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		panic("delayed: cannot register the worker's metrics: " + err.Error())
	}
	return collector
}

// observe counts one settled task: its outcome and, but for a dead or held one (which did not run), how
// long its call ran.
func (m *taskMetrics) observe(queue, function, outcome string, seconds float64) {
	ran := outcome != outcomeDead && outcome != outcomeHeld
	if outcome == outcomeDead {
		function = ""
	}
	m.mu.Lock()
	counter := m.counters[[3]string{queue, function, outcome}]
	if counter == nil {
		counter = m.tasks.WithLabelValues(queue, function, outcome)
		m.counters[[3]string{queue, function, outcome}] = counter
	}
	var observer prometheus.Observer
	if ran {
		if observer = m.observers[[2]string{queue, function}]; observer == nil {
			observer = m.duration.WithLabelValues(queue, function)
			m.observers[[2]string{queue, function}] = observer
		}
	}
	m.mu.Unlock()
	counter.Inc()
	if observer != nil {
		observer.Observe(seconds)
	}
}
