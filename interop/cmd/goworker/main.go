// Command goworker is a go-delayed worker (NewQueue, NewWorker, RegisterHandlers, Run) whose
// handlers record exactly what they received, Go types included, in a Redis list.
package main

import "github.com/delayed-py/delayed/interop/internal/common"

func main() {
	common.RunWorker(handlers) // returns after SIGHUP, go-delayed's only stop signal
}
