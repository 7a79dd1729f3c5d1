// Command contractworker is a go-delayed worker with one handler per parameter kind of the contract
// format; each records what it received (%T, %#v and JSON) in a Redis list, for the contract tests.
package main

import "github.com/delayed-py/delayed/interop/internal/common"

func main() {
	common.RunWorker(handlers) // returns after SIGHUP, go-delayed's only stop signal
}
