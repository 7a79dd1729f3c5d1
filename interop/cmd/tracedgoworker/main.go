// Command tracedgoworker is our Go worker traced with delayedotel, for the trace that crosses Python,
// Go and Python in interop/tests/test_interop_tracing.py: its worker runs each GoTask in
// delayedotel.Middleware's consumer span, and its handler Relay enqueues a PyTask with the ctx it was
// given through a Queue using delayedotel.EnqueueMiddleware, so the PyTask's producer span is the
// consumer span's child. Every span it ends is one JSON line in the -spans file.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/delayed-py/delayed/go/delayedotel"
	"github.com/delayed-py/delayed/go/v2/delayed"
	"github.com/delayed-py/delayed/interop/internal/common"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// pyQueue is where Relay enqueues its PyTasks.
var pyQueue *delayed.Queue

func main() {
	url := flag.String("url", "", "a Redis URL as Python takes them")
	queueName := flag.String("queue", "default", "the queue of GoTasks to drain")
	pyQueueName := flag.String("py-queue", "py", "the queue Relay enqueues its PyTasks to")
	spansPath := flag.String("spans", "spans.jsonl", "the file each ended span is appended to, one JSON object a line")
	flag.Parse()

	spans, err := os.OpenFile(*spansPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		common.Fatalf("cannot open %s: %v", *spansPath, err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(&jsonExporter{file: spans}))
	client, err := delayed.Connect(*url)
	if err != nil {
		common.Fatalf("cannot connect to %s: %v", *url, err)
	}
	if err := client.Ping(context.Background()).Err(); err != nil {
		common.Fatalf("cannot reach Redis: %v", err)
	}
	pyQueue = delayed.NewQueueWithClient(*pyQueueName, client)
	pyQueue.Use(delayedotel.EnqueueMiddleware(pyQueue.Name(), delayedotel.WithTracerProvider(provider)))
	queue := delayed.NewQueueWithClient(*queueName, client, delayed.DequeueTimeout(50*time.Millisecond))
	worker := delayed.NewWorker(queue, delayed.WithMiddleware(delayedotel.Middleware(delayedotel.WithTracerProvider(provider))),
		delayed.Logger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	worker.RegisterHandlers(Relay)

	common.PrintJSON(map[string]interface{}{"event": "starting", "id": worker.ID(), "queue": *queueName, "pid": os.Getpid()})
	worker.Run() // returns after SIGTERM, SIGINT or SIGHUP, once its running tasks finished
	if err := provider.Shutdown(context.Background()); err != nil {
		common.Fatalf("cannot shut the tracer provider down: %v", err)
	}
	common.PrintJSON(map[string]interface{}{"event": "stopped", "id": worker.ID()})
}

// Relay enqueues the Python function funcPath with args, with its ctx: the PyTask's producer span is a
// child of this call's consumer span.
func Relay(ctx context.Context, funcPath string, args []interface{}) error {
	_, err := pyQueue.EnqueueContext(ctx, delayed.NewPyTask(funcPath, args, nil))
	return err
}

// jsonExporter writes each span as a JSON line: what the test compares with Python's spans.
type jsonExporter struct {
	mu   sync.Mutex
	file *os.File
}

type spanLine struct {
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	TraceID      string            `json:"trace_id"`
	SpanID       string            `json:"span_id"`
	ParentSpanID string            `json:"parent_span_id"`
	Status       string            `json:"status"`
	Attributes   map[string]string `json:"attributes"`
}

func (e *jsonExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, span := range spans {
		attributes := make(map[string]string, len(span.Attributes()))
		for _, attribute := range span.Attributes() {
			attributes[string(attribute.Key)] = attribute.Value.Emit()
		}
		parent := ""
		if span.Parent().IsValid() {
			parent = span.Parent().SpanID().String()
		}
		line, err := json.Marshal(spanLine{
			Name: span.Name(), Kind: span.SpanKind().String(), TraceID: span.SpanContext().TraceID().String(),
			SpanID: span.SpanContext().SpanID().String(), ParentSpanID: parent, Status: span.Status().Code.String(),
			Attributes: attributes,
		})
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(e.file, string(line)); err != nil {
			return err
		}
	}
	return nil
}

func (e *jsonExporter) Shutdown(context.Context) error {
	return e.file.Close()
}
