// Command asynqworker is an Asynq server (github.com/hibiken/asynq) at its default Concurrency with
// the bench's two handlers, a no-op and the start latency: the peer the bench sets our Go worker against.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/delayed-py/delayed/interop/internal/asynqtasks"
	"github.com/delayed-py/delayed/interop/internal/common"
	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"
)

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueName := flag.String("queue", "default", "the Asynq queue to serve")
	concurrency := flag.Int("concurrency", 0, "tasks run at once; 0: Asynq's default, the number of CPUs")
	level := asynq.InfoLevel
	flag.Var(&level, "log-level", "Asynq's log level on stderr: debug, info, warn or error")
	flag.Parse()

	latency := goredis.NewClient(&goredis.Options{Addr: *address}) // the Elapsed handler's connection
	defer latency.Close()
	if err := latency.Ping(context.Background()).Err(); err != nil {
		common.Fatalf("cannot reach Redis at %s: %v", *address, err)
	}
	server := asynq.NewServer(asynq.RedisClientOpt{Addr: *address}, asynq.Config{
		Concurrency: *concurrency,
		Queues:      map[string]int{*queueName: 1},
		LogLevel:    level,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqtasks.Noop, func(context.Context, *asynq.Task) error { return nil })
	mux.HandleFunc(asynqtasks.Elapsed, func(ctx context.Context, task *asynq.Task) error {
		payload, err := asynqtasks.DecodeElapsed(task.Payload())
		if err != nil {
			return fmt.Errorf("bad %s payload: %w", asynqtasks.Elapsed, err)
		}
		return latency.RPush(ctx, payload.Key, common.SecondsSince(payload.Since)).Err()
	})

	common.PrintJSON(map[string]interface{}{"event": "starting", "queue": *queueName, "pid": os.Getpid()})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT) // what asynq's own Server.Run stops on
	if err := server.Start(mux); err != nil {
		common.Fatalf("asynq server did not start: %v", err)
	}
	if err := server.Ping(); err != nil {
		common.Fatalf("asynq server cannot reach Redis at %s: %v", *address, err)
	}
	common.PrintJSON(map[string]interface{}{"event": "online", "queue": *queueName, "pid": os.Getpid()})
	<-stop
	server.Shutdown() // stops the claims, waits for running tasks (up to Asynq's 8 s), then returns
	common.PrintJSON(map[string]interface{}{"event": "stopped", "pid": os.Getpid()})
}
