// Command ourgoworker is our own Go worker (go/delayed: NewQueue, NewWorker, RegisterHandlers, Run)
// with the bench's, the demo's and the live interop tests' handlers: goworker's flags and stdout
// lines, on our module instead of go-delayed's, plus -concurrency and -url.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
	"github.com/delayed-py/delayed/interop/internal/common"
	goredis "github.com/redis/go-redis/v9"
)

var (
	client goredis.UniversalClient // the handlers' and the online line's connection
	logger *slog.Logger
)

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port: the queue on NewRedisPool, as go-delayed's")
	url := flag.String("url", "", "a Redis URL as Python takes them (single, redis+sentinel://, redis+cluster://): the queue on Connect's client, instead of -redis")
	queueName := flag.String("queue", "default", "queue name")
	dequeueTimeout := flag.Duration("dequeue-timeout", time.Second, "how long one wait for a notification lasts")
	keepAliveTimeout := flag.Duration("keep-alive-timeout", 0, "lifetime of the worker's keep-alive keys; 0: the default, 60 s")
	keepAliveDuration := flag.Duration("keep-alive-duration", 15*time.Second, "how often the keep-alive keys are refreshed")
	concurrency := flag.Int("concurrency", 0, "tasks run at once; 0: the worker's default")
	logLevel := flag.String("log-level", "info", "the worker's log level on stderr: debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		common.Fatalf("unknown log level %q (debug, info, warn or error)", *logLevel)
	}
	logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	options := []delayed.QueueOption{delayed.DequeueTimeout(*dequeueTimeout), delayed.KeepAliveTimeout(*keepAliveTimeout)}
	var queue *delayed.Queue
	if *url != "" {
		connected, err := delayed.Connect(*url)
		if err != nil {
			common.Fatalf("cannot connect to %s: %v", *url, err)
		}
		client = connected
		queue = delayed.NewQueueWithClient(*queueName, client, options...)
	} else {
		client = goredis.NewClient(&goredis.Options{Addr: *address})
		queue = delayed.NewQueue(*queueName, delayed.NewRedisPool(*address), options...)
	}
	if err := client.Ping(context.Background()).Err(); err != nil {
		common.Fatalf("cannot reach Redis: %v", err)
	}
	worker := delayed.NewWorker(queue, delayed.KeepAliveDuration(*keepAliveDuration),
		delayed.Concurrency(*concurrency), delayed.Logger(logger))
	worker.RegisterHandlers(handlers...)

	id := worker.ID()
	common.PrintJSON(map[string]interface{}{"event": "starting", "id": id, "queue": *queueName, "pid": os.Getpid()})
	go announce(id, *queueName)
	worker.Run() // returns after SIGTERM, SIGINT or SIGHUP, once its running tasks finished
	common.PrintJSON(map[string]interface{}{"event": "stopped", "id": id})
}

// announce prints the online line once the worker's keep-alive key (named after its id) exists.
func announce(id, queueName string) {
	for {
		if exists, err := client.Exists(context.Background(), id).Result(); err == nil && exists == 1 {
			common.PrintJSON(map[string]interface{}{"event": "online", "id": id, "queue": queueName, "pid": os.Getpid()})
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
