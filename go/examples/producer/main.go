// Command producer enqueues a task for a Go handler and one for a Python function, both tracked, and
// prints what each returned: a producer to copy. It needs a worker of each kind on its Redis:
//
//	go run ./examples/worker -queue go                  # runs main.Add
//	python -m delayed.worker --queue py tasks           # tasks.py: def add(a, b): return a + b
//	go run ./examples/producer -redis redis://localhost:6379/0
//
// It prints "main.Add(1, 2) = 3" and "tasks:add(1, 2) = 3", or the error a task ended with.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
)

func main() {
	redisURL := flag.String("redis", delayed.ConfiguredURL(), "the Redis URL ($DELAYED_REDIS_URL by default)")
	goQueue := flag.String("go-queue", "go", "the queue Go workers serve")
	pyQueue := flag.String("py-queue", "py", "the queue Python workers serve")
	wait := flag.Duration("timeout", 30*time.Second, "how long to wait for each result")
	flag.Parse()

	client, err := delayed.Connect(*redisURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(2)
	}
	defer client.Close()

	calls := []struct {
		queue *delayed.Queue
		task  delayed.Task
		shown string
	}{
		{delayed.NewQueueWithClient(*goQueue, client), delayed.NewGoTask("main.Add", 1, 2), "main.Add(1, 2)"},
		{delayed.NewQueueWithClient(*pyQueue, client), delayed.NewPyTask("tasks:add", []int{1, 2}, nil), "tasks:add(1, 2)"},
	}
	failed := false
	for _, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), *wait)
		// ResultTTL tracks the task: its record and result are kept an hour after it ended.
		handle, err := call.queue.EnqueueContext(ctx, call.task, delayed.ResultTTL(time.Hour), delayed.MaxRetries(2))
		if err == nil {
			err = printResult(ctx, handle, call.shown)
		}
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "producer: %s: %v\n", call.shown, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// printResult waits for a task's result and prints it; a task that failed says how.
func printResult(ctx context.Context, handle *delayed.TaskHandle, shown string) error {
	result, err := handle.Result(ctx)
	var failed *delayed.TaskFailedError
	if errors.As(err, &failed) && failed.Info.Letter != "" {
		return fmt.Errorf("%w (its dead letter: %s)", err, failed.Info.Letter)
	}
	if err != nil {
		return err
	}
	var sum int
	if err := result.Decode(&sum); err != nil {
		return err
	}
	fmt.Printf("%s = %d\n", shown, sum)
	return nil
}
