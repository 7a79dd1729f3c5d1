// Command sigworker is a worker the package's tests start as a process of its own, to stop it with
// real signals: its Block handler runs until the test pushes the task's name to the list "release".
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
	goredis "github.com/redis/go-redis/v9"
)

var client *goredis.Client

// Block waits until name is pushed to the list "release" (or its context ends), then pushes it to "done".
func Block(ctx context.Context, name string) error {
	for {
		popped, err := client.BLPop(ctx, time.Second, "release:"+name).Result()
		if err == goredis.Nil {
			continue
		}
		if err != nil {
			return err
		}
		return client.RPush(ctx, "done", popped[1]).Err()
	}
}

// Record pushes name to the list "done".
func Record(name string) error {
	return client.RPush(context.Background(), "done", name).Err()
}

func main() {
	addr := flag.String("redis", "", "host:port")
	queueName := flag.String("queue", "jobs", "the queue")
	concurrency := flag.Int("concurrency", 1, "tasks at once")
	grace := flag.Duration("grace", 0, "grace period")
	flag.Parse()
	client = goredis.NewClient(&goredis.Options{Addr: *addr})
	queue := delayed.NewQueueWithClient(*queueName, client, delayed.DequeueTimeout(100*time.Millisecond))
	worker := delayed.NewWorker(queue, delayed.Concurrency(*concurrency), delayed.GracePeriod(*grace),
		delayed.Logger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	worker.RegisterHandlers(Block, Record)
	worker.Run()
}
