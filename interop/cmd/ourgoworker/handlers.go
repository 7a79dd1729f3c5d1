package main

import (
	"context"

	"github.com/delayed-py/delayed/interop/internal/common"
)

// handlers are registered as "main.<Name>": goworker's names for the bench's two (Noop, Elapsed),
// so one GoTask reaches either worker, and the demo's Add.
var handlers = []interface{}{Noop, Elapsed, Add}

// Noop does nothing: the bench's drain.
func Noop() {}

// Elapsed RPUSHes to key the seconds from the Unix time since to its start: the bench's start latency.
func Elapsed(key string, since float64) {
	if err := client.RPush(context.Background(), key, common.SecondsSince(since)).Err(); err != nil {
		logger.Error("Elapsed: RPUSH failed", "key", key, "error", err)
	}
}

// Add returns a+b: `make demo`'s tracked GoTask, whose result a Python producer reads with
// TaskHandle.result(). It takes the task's context first and returns (T, error), as our worker allows.
func Add(ctx context.Context, a, b int) (int, error) {
	return a + b, ctx.Err()
}
