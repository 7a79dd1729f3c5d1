// Package delayedotel traces delayed's Go workers and producers with OpenTelemetry, as Python's
// delayed.integrations.opentelemetry does: a producer span ("send <queue>", SpanKindProducer) per
// enqueued task, whose W3C trace context (traceparent, tracestate) rides in the task's headers, and a
// consumer span ("process <queue>", SpanKindConsumer) per run, the child of the context its headers
// carry. A trace so crosses from Python to Go and from Go to Python:
//
//	worker := delayed.NewWorker(queue, delayed.WithMiddleware(delayedotel.Middleware()))
//	queue.Use(delayedotel.EnqueueMiddleware(queue.Name()))
//
// A handler that enqueues with the context it was given (EnqueueContext(ctx, ...)) makes its task's
// producer span a child of its own consumer span.
//
// It is a module of its own (OpenTelemetry's Go API needs a newer Go than delayed's module does), so a
// service that does not trace its tasks does not build OpenTelemetry.
package delayedotel

import (
	"context"
	"fmt"

	"github.com/delayed-py/delayed/go/v2/delayed"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// System is messaging.system: the messaging system, as OpenTelemetry names it.
const System = "delayed"

// The attributes of the spans: OpenTelemetry's messaging conventions, and delayed's own under
// messaging.delayed (the names Python's integration writes).
const (
	messagingSystem = attribute.Key("messaging.system")
	destination     = attribute.Key("messaging.destination.name")
	operationType   = attribute.Key("messaging.operation.type")
	operationName   = attribute.Key("messaging.operation.name")
	messageID       = attribute.Key("messaging.message.id")
	clientID        = attribute.Key("messaging.client.id")
	funcPath        = attribute.Key("messaging.delayed.func_path")
	attempt         = attribute.Key("messaging.delayed.attempt")
)

const instrumentation = "github.com/delayed-py/delayed/go/delayedotel"

type config struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
}

// Option changes where the spans go or how their context is carried.
type Option func(*config)

// WithTracerProvider sends the spans to provider instead of OpenTelemetry's global one
// (otel.GetTracerProvider(), read when the middleware is made).
func WithTracerProvider(provider trace.TracerProvider) Option {
	return func(c *config) { c.provider = provider }
}

// WithPropagator carries the context in the headers with propagator instead of the default: W3C
// trace context and baggage, the propagators Python's OpenTelemetry uses by default (Go's global
// propagator carries nothing until it is set).
func WithPropagator(propagator propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = propagator }
}

func newConfig(options []Option) config {
	c := config{
		provider:   otel.GetTracerProvider(),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	for _, option := range options {
		option(&c)
	}
	return c
}

func (c config) tracer() trace.Tracer {
	return c.provider.Tracer(instrumentation)
}

// Middleware runs each call in a consumer span, "process <queue>", the child of the context the task's
// headers carry (its producer's span), and passes the handler a ctx holding it: the spans the handler
// starts, and the tasks it enqueues with ctx, are its children. A handler's error (and a panic, raised
// on) is recorded on the span and sets its status.
func Middleware(options ...Option) delayed.Middleware {
	c := newConfig(options)
	tracer := c.tracer()
	return func(next delayed.Next) delayed.Next {
		return func(ctx context.Context, call *delayed.Call) (result any, err error) {
			attributes := []attribute.KeyValue{
				messagingSystem.String(System), destination.String(call.Queue), operationType.String("process"),
				operationName.String("process"), funcPath.String(call.FuncPath), attempt.Int(call.Attempt),
				clientID.String(call.WorkerID),
			}
			if call.ID != "" {
				attributes = append(attributes, messageID.String(call.ID))
			}
			parent := c.propagator.Extract(ctx, propagation.MapCarrier(call.Headers))
			ctx, span := tracer.Start(parent, "process "+call.Queue, trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(attributes...))
			defer func() {
				if recovered := recover(); recovered != nil {
					failed(span, fmt.Errorf("panic: %v", recovered))
					span.End()
					panic(recovered)
				}
				if err != nil {
					failed(span, err)
				}
				span.End()
			}()
			return next(ctx, call)
		}
	}
}

// failed records err on span and makes its status an error.
func failed(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// EnqueueMiddleware starts a producer span, "send <queue>", around each enqueue of the Queue named queue
// that Uses it (queue.Use(delayedotel.EnqueueMiddleware(queue.Name()))), the child of the span in the
// ctx given to EnqueueContext, and adds its context to the task's headers (Header), beside any the task
// has. The span ends once the task is written, with its id if it is tracked; an enqueue that fails
// records its error and ends with an error status.
func EnqueueMiddleware(queue string, options ...Option) delayed.EnqueueMiddleware {
	c := newConfig(options)
	tracer := c.tracer()
	return func(next delayed.EnqueueNext) delayed.EnqueueNext {
		return func(ctx context.Context, task delayed.Task, taskOptions []delayed.TaskOption) (*delayed.TaskHandle, error) {
			attributes := []attribute.KeyValue{
				messagingSystem.String(System), destination.String(queue), operationType.String("send"),
				operationName.String("send"),
			}
			if path, ok := task.(interface{ FuncPath() string }); ok {
				attributes = append(attributes, funcPath.String(path.FuncPath()))
			}
			ctx, span := tracer.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(attributes...))
			defer span.End()
			carrier := propagation.MapCarrier{}
			c.propagator.Inject(ctx, carrier)
			withHeaders := append(make([]delayed.TaskOption, 0, len(taskOptions)+len(carrier)), taskOptions...)
			for name, value := range carrier {
				withHeaders = append(withHeaders, delayed.Header(name, value))
			}
			handle, err := next(ctx, task, withHeaders)
			if handle != nil {
				span.SetAttributes(messageID.String(handle.ID()))
			}
			if err != nil {
				failed(span, err)
			}
			return handle, err
		}
	}
}
