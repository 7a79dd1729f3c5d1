package delayed

import (
	"reflect"
	"testing"
	"time"
)

// go-delayed's worker API as go-delayed declares it (github.com/yizhisec/go-delayed/delayed): each of
// ours keeps its signature, so a program built on go-delayed builds on ours by its import path alone.
var (
	_ func(*Queue, ...WorkerOption) *Worker           = NewWorker
	_ func(time.Duration) WorkerOption                = KeepAliveDuration
	_ func(*Worker, ...interface{})                   = (*Worker).RegisterHandlers
	_ func(*Worker)                                   = (*Worker).Run
	_ func(*Worker)                                   = (*Worker).Stop
	_ func(*Worker, *GoTask)                          = (*Worker).Execute
	_ func(*Worker)                                   = (*Worker).KeepAlive
	_ func(*Worker)                                   = (*Worker).Die
	_ func(interface{}) *Handler                      = NewHandler
	_ func(*Handler, []byte) ([]reflect.Value, error) = (*Handler).Call
	_ func(*Queue) (*GoTask, error)                   = (*Queue).Dequeue
	_ func(*Queue) error                              = (*Queue).Release
	_ func()                                          = Recover
	_ func(int) string                                = RandHexString
	_ [3]uint32                                       = [...]uint32{StatusStopped, StatusRunning, StatusStopping}
	_ WorkerOption                                    = func(*Worker) {}
)

func TestGoDelayedsHelpers(t *testing.T) {
	if id := RandHexString(16); !hexID.MatchString(id) || id == RandHexString(16) {
		t.Errorf("RandHexString(16) = %q", id)
	}
	func() {
		defer Recover()
		panic("recovered")
	}()
	if StatusStopped != 0 || StatusRunning != 1 || StatusStopping != 2 {
		t.Error("the statuses are not go-delayed's values")
	}
}
