package delayed

import "time"

// go-delayed's producer and sweeper API, signature for signature (a program moved from go-delayed
// builds against ours): this file does not compile if one of them changes.
var (
	_ func(*Queue) error                             = (*Queue).Clear
	_ func(*Queue) (int, error)                      = (*Queue).Len
	_ func(*Queue, Task) error                       = (*Queue).Enqueue
	_ func(*Queue) (int, error)                      = (*Queue).RequeueLost
	_ func(...*Queue) *Sweeper                       = NewSweeper
	_ func(*Sweeper, time.Duration)                  = (*Sweeper).SetInterval
	_ func(*Sweeper)                                 = (*Sweeper).Run
	_ func(*Sweeper)                                 = (*Sweeper).Stop
	_ func(string, ...interface{}) *GoTask           = NewGoTask
	_ func(string, interface{}, interface{}) *PyTask = NewPyTask
)
