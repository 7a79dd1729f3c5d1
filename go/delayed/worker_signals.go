package delayed

import (
	"os"
	"os/signal"
	"syscall"
)

// stopSignals are the signals Run takes: the first one stops the worker gracefully, a second one ends
// the grace period at once (Python's workers take the same three).
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// takeSignals has the stop signals stop the worker until the function it returns is called (which
// gives them back to whoever had them: Go's default ends the process).
func (w *Worker) takeSignals() (release func()) {
	signals := make(chan os.Signal, len(stopSignals))
	done := make(chan struct{})
	signal.Notify(signals, stopSignals...)
	go func() {
		count := 0
		for {
			select {
			case <-done:
				return
			case sig := <-signals:
				count++
				if count == 1 {
					w.logger.Info("stop signal: stopping gracefully (another one stops at once)", "worker", w.id, "signal", sig.String())
					w.Stop()
				} else {
					w.logger.Warn("second stop signal: running tasks are left held for a sweeper", "worker", w.id, "signal", sig.String())
					w.cutGrace()
				}
			}
		}
	}()
	return func() {
		signal.Stop(signals)
		close(done)
	}
}
