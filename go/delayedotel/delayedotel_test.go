package delayedotel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/delayed-py/delayed/go/v2/delayed"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// waitDeadline bounds every wait: only a failing test waits it out.
const waitDeadline = 60 * time.Second

// startQueue is a queue named name on a throwaway redis-server (no persistence) the test started.
func startQueue(t *testing.T, name string) *delayed.Queue {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	listener.Close()
	server := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no")
	if err := server.Start(); err != nil {
		t.Skipf("redis-server did not start (is it installed?): %v", err)
	}
	t.Cleanup(func() {
		server.Process.Kill()
		server.Wait()
	})
	client, err := delayed.Connect(fmt.Sprintf("redis://127.0.0.1:%d/0", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	deadline := time.Now().Add(waitDeadline)
	for client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer within %v", port, waitDeadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return delayed.NewQueueWithClient(name, client, delayed.DequeueTimeout(50*time.Millisecond))
}

// traced is a tracer provider whose ended spans the recorder holds.
func traced(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	return recorder, provider
}

// runWorker runs a worker of q with the tracing middleware and handlers until the test ends.
func runWorker(t *testing.T, q *delayed.Queue, option Option, handlers ...interface{}) {
	t.Helper()
	worker := delayed.NewWorker(q, delayed.WithMiddleware(Middleware(option)))
	worker.RegisterHandlers(handlers...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.RunContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// outcome waits for a tracked task's end: its result's error (nil when it returned).
func outcome(t *testing.T, handle *delayed.TaskHandle) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	_, err := handle.Result(ctx)
	var failed *delayed.TaskFailedError
	if err != nil && !errors.As(err, &failed) {
		t.Fatalf("the task did not end: %v", err)
	}
	return err
}

// named is the one ended span of that name.
func named(t *testing.T, recorder *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, span := range recorder.Ended() {
		if span.Name() == name {
			found = append(found, span)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(found), name)
	}
	return found[0]
}

func attributes(span sdktrace.ReadOnlySpan) map[attribute.Key]string {
	found := map[attribute.Key]string{}
	for _, kv := range span.Attributes() {
		found[kv.Key] = kv.Value.Emit()
	}
	return found
}

// seen is the span the last Remember call found in its ctx.
var seen = make(chan trace.SpanContext, 1)

// Remember is a handler that passes on the span its ctx holds.
func Remember(ctx context.Context) {
	seen <- trace.SpanContextFromContext(ctx)
}

// Fail is a handler that fails.
func Fail(ctx context.Context) error {
	return errors.New("no luck")
}

// Explode is a handler that panics.
func Explode(ctx context.Context) {
	panic("boom")
}

func TestTheProducerSpanIsTheConsumerSpansParentAndTheHandlerRunsInTheConsumerSpan(t *testing.T) {
	recorder, provider := traced(t)
	queue := startQueue(t, "traced")
	queue.Use(EnqueueMiddleware(queue.Name(), WithTracerProvider(provider)))
	runWorker(t, queue, WithTracerProvider(provider), Remember)

	ctx, request := provider.Tracer("test").Start(context.Background(), "request")
	handle, err := queue.EnqueueContext(ctx, delayed.NewGoTask("github.com/delayed-py/delayed/go/delayedotel.Remember"),
		delayed.ResultTTL(time.Minute))
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	if err := outcome(t, handle); err != nil {
		t.Fatal(err)
	}

	send, process := named(t, recorder, "send traced"), named(t, recorder, "process traced")
	if send.SpanKind() != trace.SpanKindProducer || process.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("kinds %v and %v", send.SpanKind(), process.SpanKind())
	}
	if send.Parent().SpanID() != request.SpanContext().SpanID() || process.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("send's parent %v (want the request's %v), process's %v (want send's %v)", send.Parent().SpanID(),
			request.SpanContext().SpanID(), process.Parent().SpanID(), send.SpanContext().SpanID())
	}
	if traceID := request.SpanContext().TraceID(); send.SpanContext().TraceID() != traceID || process.SpanContext().TraceID() != traceID {
		t.Fatal("the spans are not of the request's trace")
	}
	if inHandler := <-seen; inHandler.SpanID() != process.SpanContext().SpanID() {
		t.Fatalf("the handler's ctx holds span %v, not the consumer span %v", inHandler.SpanID(), process.SpanContext().SpanID())
	}
	common := map[attribute.Key]string{
		messagingSystem: "delayed", destination: "traced", messageID: handle.ID(),
		funcPath: "github.com/delayed-py/delayed/go/delayedotel.Remember",
	}
	wantSend := map[attribute.Key]string{operationType: "send", operationName: "send"}
	wantProcess := map[attribute.Key]string{operationType: "process", operationName: "process", attempt: "0"}
	for k, v := range common {
		wantSend[k], wantProcess[k] = v, v
	}
	if got := attributes(send); fmt.Sprint(got) != fmt.Sprint(wantSend) {
		t.Fatalf("send's attributes %v, want %v", got, wantSend)
	}
	got := attributes(process)
	if got[clientID] == "" {
		t.Fatalf("no %s on the consumer span: %v", clientID, got)
	}
	delete(got, clientID)
	if fmt.Sprint(got) != fmt.Sprint(wantProcess) {
		t.Fatalf("process's attributes %v, want %v", got, wantProcess)
	}
}

func TestAHandlersErrorAndPanicAreRecordedOnItsSpan(t *testing.T) {
	recorder, provider := traced(t)
	queue := startQueue(t, "traced")
	runWorker(t, queue, WithTracerProvider(provider), Fail, Explode)
	for _, name := range []string{"Fail", "Explode"} {
		handle, err := queue.EnqueueContext(context.Background(), delayed.NewGoTask("github.com/delayed-py/delayed/go/delayedotel."+name),
			delayed.ResultTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := outcome(t, handle); err == nil {
			t.Fatalf("%s succeeded", name)
		}
	}
	spans := recorder.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, want := range []string{"no luck", "panic: boom"} {
		span := spans[i]
		if span.Status().Code != codes.Error || span.Status().Description != want {
			t.Errorf("span %d: status %v %q, want an error %q", i, span.Status().Code, span.Status().Description, want)
		}
		if events := span.Events(); len(events) != 1 || events[0].Name != "exception" {
			t.Errorf("span %d: events %v, want the exception", i, events)
		}
		if span.Parent().IsValid() {
			t.Errorf("span %d: a parent, though its task carried no traceparent", i)
		}
	}
}
