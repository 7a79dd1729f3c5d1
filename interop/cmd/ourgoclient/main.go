// Command ourgoclient is a Go service calling a function through our Go module's client: it enqueues
// one tracked task (a PyTask for a Python worker or a GoTask for a Go one) with EnqueueContext and
// ResultTTL, waits for its outcome with TaskHandle.Result, and prints it as one JSON line.
//
// Exit status: 0 with a result, 2 when the task ended without one (*delayed.TaskFailedError),
// 1 when it could not enqueue or the wait ended first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
	"github.com/delayed-py/delayed/interop/internal/common"
)

func main() {
	url := flag.String("url", delayed.ConfiguredURL(), "a Redis URL as Python takes them (single, redis+sentinel://, redis+cluster://)")
	queueName := flag.String("queue", "default", "queue name")
	kind := flag.String("kind", "py", "py: a PyTask (NewPyTask(func, args, nil)); go: a GoTask (NewGoTask(func, args))")
	funcPath := flag.String("func", "", "module:func for a PyTask, main.Name for a GoTask")
	argsJSON := flag.String("args", "", "PyTask: the args list; GoTask: the argument (a list is a several-parameter func's arguments); absent: none")
	resultTTL := flag.Duration("result-ttl", time.Minute, "how long the task's record is kept after it ended (ResultTTL)")
	timeout := flag.Duration("timeout", time.Minute, "how long Result waits for the outcome")
	flag.Parse()

	task := build(*kind, *funcPath, *argsJSON)
	client, err := delayed.Connect(*url)
	if err != nil {
		common.Fatalf("cannot connect: %v", err)
	}
	queue := delayed.NewQueueWithClient(*queueName, client)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	handle, err := queue.EnqueueContext(ctx, task, delayed.ResultTTL(*resultTTL))
	if err != nil {
		common.Fatalf("cannot enqueue: %v", err)
	}
	os.Exit(report(handle.ID(), wait(ctx, handle)))
}

// build is the task the flags describe.
func build(kind, funcPath, argsJSON string) delayed.Task {
	var args interface{}
	if argsJSON != "" {
		parsed, err := common.ParseJSON(argsJSON)
		if err != nil {
			common.Fatalf("-args is no JSON: %v", err)
		}
		args = parsed
	}
	switch kind {
	case "py":
		return delayed.NewPyTask(funcPath, args, nil)
	case "go":
		if argsJSON == "" {
			return delayed.NewGoTask(funcPath)
		}
		return delayed.NewGoTask(funcPath, args)
	}
	common.Fatalf("unknown -kind %q (py or go)", kind)
	return nil
}

// outcome is what Result gave: the decoded value, or the error.
type outcome struct {
	value interface{}
	err   error
}

func wait(ctx context.Context, handle *delayed.TaskHandle) outcome {
	result, err := handle.Result(ctx)
	if err != nil {
		return outcome{err: err}
	}
	var value interface{}
	if err := result.Decode(&value); err != nil {
		return outcome{err: fmt.Errorf("the result does not decode: %w", err)}
	}
	return outcome{value: value}
}

// report prints the outcome as one JSON line: {"id", "result"}, or {"id", "error", "error_type"}
// with, for a *TaskFailedError, its record's "status", "task_error" and "letter"; the exit status.
func report(id string, got outcome) int {
	line := map[string]interface{}{"id": id}
	if got.err == nil {
		line["result"] = jsonable(got.value)
		common.PrintJSON(line)
		return 0
	}
	line["error"], line["error_type"] = got.err.Error(), fmt.Sprintf("%T", got.err)
	var failed *delayed.TaskFailedError
	if !errors.As(got.err, &failed) {
		common.PrintJSON(line)
		return 1
	}
	line["status"], line["task_error"], line["letter"] = failed.Info.Status, failed.Info.Error, failed.Info.Letter
	common.PrintJSON(line)
	return 2
}

// jsonable is a decoded msgpack value with its maps' keys made strings, which encoding/json needs.
func jsonable(value interface{}) interface{} {
	v := reflect.ValueOf(value)
	switch v.Kind() {
	case reflect.Map:
		out := make(map[string]interface{}, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = jsonable(it.Value().Interface())
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return value
		}
		out := make([]interface{}, v.Len())
		for i := range out {
			out[i] = jsonable(v.Index(i).Interface())
		}
		return out
	}
	return value
}
