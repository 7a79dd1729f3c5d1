package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
	"github.com/delayed-py/delayed/interop/internal/common"
)

// handlers are registered as "main.<Name>": goworker's names and parameters for those it has too
// (Noop, Elapsed, Count, Slow), so one GoTask reaches either worker; the rest show what only our
// worker does: results (Add, Echo, MakePoint), failures that are retried and dead-lettered (Fail,
// Panic), workflow steps (FailOnce, Outcomes), and a cancel reaching a running handler (UntilCancelled).
var handlers = []interface{}{Noop, Elapsed, Add, Echo, MakePoint, Fail, Panic, Count, Slow, FailOnce, Outcomes,
	UntilCancelled}

// Point is a struct result: Python's TaskHandle.result() reads it as a dict of its fields.
type Point struct {
	X, Y  int
	Label string
}

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

// Echo returns its argument as it decoded (an int, a string, a list, a map): the tracked task's result.
func Echo(v interface{}) (interface{}, error) {
	return v, nil
}

// MakePoint returns a struct, which a tracked task's record holds as the map of its fields.
func MakePoint(x, y int, label string) Point {
	return Point{X: x, Y: y, Label: label}
}

// Fail counts one run of id in the hash "executions" and fails with message: retried as the task's
// options say, then dead-lettered with message as its error.
func Fail(ctx context.Context, id, message string) error {
	if err := client.HIncrBy(ctx, "executions", id, 1).Err(); err != nil {
		return err
	}
	return errors.New(message)
}

// Panic counts one run of id in the hash "executions" and panics with message: a failure whose dead
// letter holds the panic's stack.
func Panic(ctx context.Context, id, message string) error {
	if err := client.HIncrBy(ctx, "executions", id, 1).Err(); err != nil {
		return err
	}
	panic(message)
}

// Count counts one execution of id in the hash "executions", as goworker's Count does.
func Count(ctx context.Context, id string) error {
	return client.HIncrBy(ctx, "executions", id, 1).Err()
}

// Slow counts a start of id in the hash "starts" and marks it started (key started:<id> = pid), as
// goworker's Slow does, sleeps ms whatever its context says, then counts an execution of id: a task
// interrupted midway shows as a start without an execution, one run twice as two starts.
func Slow(ctx context.Context, id string, ms int) error {
	if err := client.HIncrBy(ctx, "starts", id, 1).Err(); err != nil {
		return err
	}
	if err := client.Set(ctx, "started:"+id, os.Getpid(), 0).Err(); err != nil {
		return err
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return client.HIncrBy(context.WithoutCancel(ctx), "executions", id, 1).Err()
}

// FailOnce counts a run of id in the hash "executions"; its first run fails, later ones return
// value: a workflow's step (value the previous step's result) that is dead-lettered, then requeued
// and run on.
func FailOnce(ctx context.Context, id string, value int) (int, error) {
	runs, err := client.HIncrBy(ctx, "executions", id, 1).Result()
	if err != nil {
		return 0, err
	}
	if runs == 1 {
		return 0, fmt.Errorf("the first run of %s fails", id)
	}
	return value, nil
}

// Outcomes is a group's callback in "pass" mode: the members' results in order, each as it decoded,
// but a member that failed (a delayed.StepFailed) as the map {"failed": its func, "status", "error"}.
func Outcomes(results []any) []any {
	for i, result := range results {
		if failed, ok := result.(delayed.StepFailed); ok {
			results[i] = map[string]string{"failed": failed.Func, "status": string(failed.Status), "error": failed.Error}
		}
	}
	return results
}

// UntilCancelled marks id started (key started:<id> = pid), waits until its context ends, sets the key
// cause:<id> to the context's cause (delayed.ErrCancelled's text once its task's cancel was requested),
// and returns value: a result the cancelled task's record must not keep.
func UntilCancelled(ctx context.Context, id string, value int) (int, error) {
	if err := client.Set(ctx, "started:"+id, os.Getpid(), 0).Err(); err != nil {
		return 0, err
	}
	<-ctx.Done()
	return value, client.Set(context.WithoutCancel(ctx), "cause:"+id, context.Cause(ctx).Error(), 0).Err()
}
