package delayed

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

const (
	defaultSweeperInterval = time.Minute
	// moveDueInterval is how often a sweeper, and each of our workers, moves due scheduled tasks into
	// their queues: how late a delayed task or a retry may start (Python's MOVE_DUE_INTERVAL). A
	// sweeper rides out a Redis outage as a worker does (outage.go's waits).
	moveDueInterval = 500 * time.Millisecond
)

// Sweeper keeps recovering lost tasks (go-delayed's, with our sweep): every interval it requeues
// the tasks of workers whose keep-alive lapsed in each of its queues, counting our workers' deaths in
// the tasks and dead-lettering crash loops (see Queue.RequeueLost), and tops up missing
// notifications; between sweeps it moves due scheduled tasks (delays, retries with backoff) into the
// queues twice a second, as Python's sweeper does, so a queue only go-delayed's workers drain gets
// them. Our workers and sweepers, Python's and Go's, sweep a queue at most once per interval between
// them: a sweeper leaves a queue another swept within its interval for its next round.
type Sweeper struct {
	queues     []*Queue
	interval   time.Duration
	maxCrashes int
	logger     *slog.Logger

	mu   sync.Mutex
	stop context.CancelFunc // ends the running RunContext
}

// NewSweeper creates a new sweeper of these queues: every minute, DefaultMaxCrashes, logging to slog's default.
func NewSweeper(queues ...*Queue) *Sweeper {
	return &Sweeper{queues: queues, interval: defaultSweeperInterval, maxCrashes: DefaultMaxCrashes, logger: slog.Default()}
}

// SetInterval sets the interval of the sweeper (a value that is not positive is ignored).
func (s *Sweeper) SetInterval(interval time.Duration) {
	if interval > 0 {
		s.interval = interval
	}
}

// SetMaxCrashes dead-letters a task once our workers died holding it more than n times (Python's
// sweeper --max-crashes); 0 counts no crashes: every task is requeued as it is. A negative n is ignored.
func (s *Sweeper) SetMaxCrashes(n int) {
	if n >= 0 {
		s.maxCrashes = n
	}
}

// SetLogger sets where the sweeper logs: what each sweep did, crash loops (WARN), a Redis outage.
func (s *Sweeper) SetLogger(logger *slog.Logger) {
	if logger != nil {
		s.logger = logger
	}
}

// Run starts the sweeper, and returns once Stop is called (go-delayed's). It handles no signal, as
// go-delayed's does not: RunContext with signal.NotifyContext's context stops on one.
func (s *Sweeper) Run() {
	s.RunContext(context.Background())
}

// RunContext runs the sweeper until ctx is done or Stop is called. Redis errors are ridden out: it
// logs the outage once, and tries again after 0.1 s, then twice as long each time, up to 10 s.
func (s *Sweeper) RunContext(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.stop = cancel
	s.mu.Unlock()
	names := make([]string, len(s.queues))
	for i, queue := range s.queues {
		names[i] = queue.name
	}
	s.logger.Info("sweeping", "queues", names, "interval", s.interval, "max_crashes", s.maxCrashes,
		"move_due_interval", moveDueInterval)
	nextSweep, outageWait := time.Now(), time.Duration(0)
	for ctx.Err() == nil {
		sweeping := !time.Now().Before(nextSweep)
		wait := moveDueInterval
		if err := s.round(ctx, sweeping); err != nil {
			if ctx.Err() != nil {
				break
			}
			if outageWait == 0 {
				s.logger.Warn("sweeper: Redis error; retrying until it is back", "error", err)
				outageWait = outageFirstWait
			} else {
				outageWait = min(2*outageWait, outageMaxWait)
			}
			wait = outageWait
		} else {
			if outageWait != 0 {
				s.logger.Warn("sweeper: Redis is back")
				outageWait = 0
			}
			if sweeping {
				nextSweep = time.Now().Add(s.interval)
			}
			wait = max(0, min(wait, time.Until(nextSweep)))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
	}
}

// Stop stops the sweeper: a running Run or RunContext returns once its round is over.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
}

// round moves every queue's due tasks, then, if sweeping, sweeps each queue no one swept within the
// interval; the first Redis error ends it.
func (s *Sweeper) round(ctx context.Context, sweeping bool) error {
	for _, queue := range s.queues {
		if err := queue.moveDue(ctx); err != nil {
			return err
		}
	}
	if !sweeping {
		return nil
	}
	for _, queue := range s.queues {
		claimed, err := queue.claimSweep(ctx, s.interval)
		if err != nil {
			return err
		}
		if !claimed {
			continue
		}
		swept, err := queue.sweep(ctx, s.maxCrashes)
		s.tell(queue, swept)
		if err != nil {
			return err
		}
	}
	return nil
}

// tell logs what a sweep of queue did.
func (s *Sweeper) tell(queue *Queue, swept sweepResult) {
	for _, loop := range swept.crashLoops {
		if !loop.buried {
			continue
		}
		if loop.reason == ReasonCrashLoop {
			s.logger.Warn("dead-lettered a crash loop", "queue", queue.name, "func", loop.funcPath,
				"crashes", loop.crashes, "max_crashes", s.maxCrashes, "worker", loop.workerID)
		} else {
			s.logger.Warn("dead-lettered a task its worker died holding: it is not a task our workers run",
				"queue", queue.name, "reason", loop.reason, "worker", loop.workerID)
		}
	}
	for _, failure := range swept.failures {
		s.logger.Error("could not sweep a held task; left for the next sweep", "queue", queue.name, "error", failure)
	}
	if swept.notified > 0 {
		s.logger.Info("requeued lost tasks", "queue", queue.name, "notifications", swept.notified)
	}
}
