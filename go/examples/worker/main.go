// Command worker runs Go handlers for tasks of a delayed queue: a worker to copy and fill with your own
// handlers. Python enqueues its tasks by the handlers' names:
//
//	queue.enqueue(GoTask("main.Add", [1, 2]), result_ttl=60).result()  # 3
//
// It stops gracefully on SIGTERM, SIGINT or SIGHUP: claimed tasks it has not started go back to the
// queue, running ones finish, and it goes offline.
//
//	go run ./examples/worker -redis redis://localhost:6379/0 -queue default -concurrency 8 -metrics-addr :9100
//
// On a Redis Cluster (-redis redis+cluster://host:port), name the queue with a hash tag: -queue '{default}'.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Add returns the sum of two numbers: GoTask("main.Add", [1, 2]).
func Add(a, b int) int {
	return a + b
}

// Point is a result Python reads as a dict: {"X": 1, "Y": 2}.
type Point struct {
	X, Y int
}

// Swap returns the point with its coordinates swapped: GoTask("main.Swap", [1, 2]) (a struct parameter
// takes an array of its fields, as go-delayed decodes it; a struct result reads in Python as a dict).
func Swap(p Point) Point {
	return Point{X: p.Y, Y: p.X}
}

// Sleep waits seconds, or until its context ends (its time limit, or the worker's grace period).
func Sleep(ctx context.Context, seconds float64) error {
	select {
	case <-time.After(time.Duration(seconds * float64(time.Second))):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fail always fails: with max_retries it is retried with backoff, then dead-lettered.
func Fail(message string) error {
	return errors.New(message)
}

func main() {
	redisURL := flag.String("redis", delayed.ConfiguredURL(),
		"Redis: a URL as Python's delayed takes it (redis://, rediss://, unix://, redis+sentinel://, redis+cluster://; "+
			"$DELAYED_REDIS_URL by default), or host:port")
	queueName := flag.String("queue", "default", "the queue to serve")
	concurrency := flag.Int("concurrency", 1, "tasks run at once")
	metricsAddr := flag.String("metrics-addr", "", "serve Prometheus metrics on this address (host:port), on /metrics")
	keepAliveTimeout := flag.Duration("keep-alive-timeout", time.Minute,
		"how long the worker's keep-alive keys live without a refresh: a sweeper requeues what a dead worker held after this")
	grace := flag.Duration("grace-period", 0,
		"at a stop, how long running tasks may take before they are left for a sweeper (0: no bound; a second signal ends it)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	address := *redisURL
	if address != "" && !strings.Contains(address, "://") {
		address = "redis://" + address
	}
	client, err := delayed.Connect(address)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	defer client.Close()
	queue := delayed.NewQueueWithClient(*queueName, client, delayed.KeepAliveTimeout(*keepAliveTimeout))
	worker := delayed.NewWorker(queue, delayed.Concurrency(*concurrency), delayed.Logger(logger),
		delayed.KeepAliveDuration(*keepAliveTimeout/4), delayed.GracePeriod(*grace), delayed.Metrics(prometheus.DefaultRegisterer))
	worker.RegisterHandlers(Add, Swap, Sleep, Fail)

	if *metricsAddr != "" {
		server := &http.Server{Addr: *metricsAddr, Handler: promhttp.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server stopped", "error", err)
			}
		}()
		defer server.Shutdown(context.Background())
	}
	worker.Run() // until SIGTERM, SIGINT or SIGHUP
}
