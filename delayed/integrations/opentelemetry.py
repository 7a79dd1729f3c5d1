"""OpenTelemetry tracing for delayed's producers and workers: `TracingMiddleware`.

A task enqueued through a `Queue(..., middleware=[TracingMiddleware()])` gets a producer span,
"send <queue>", whose W3C trace context (`traceparent`, and `tracestate` where there is one) the
middleware writes into the task's `headers` option. A worker with the same middleware runs the task in a
consumer span, "process <queue>", whose parent is that context: one trace from the code that enqueued the
task to the code that ran it, across processes, machines and languages (our Go worker's
`delayedotel.Middleware` reads and writes the same header).

The span attributes follow OpenTelemetry's semantic conventions for messaging; those of delayed's own are
under `messaging.delayed.`.
"""
import contextlib
from typing import Dict, Iterator, Optional, Union

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..wire.hooks import Call, Enqueuing, Middleware

SYSTEM = "delayed"
"""messaging.system: the messaging system, as OpenTelemetry names it."""

# The attributes each span carries (OpenTelemetry's messaging conventions, and delayed's own).
MESSAGING_SYSTEM = "messaging.system"
DESTINATION = "messaging.destination.name"
OPERATION_TYPE = "messaging.operation.type"
OPERATION_NAME = "messaging.operation.name"
MESSAGE_ID = "messaging.message.id"
CLIENT_ID = "messaging.client.id"
FUNC_PATH = "messaging.delayed.func_path"
ATTEMPT = "messaging.delayed.attempt"

_INSTRUMENTATION = "delayed.integrations.opentelemetry"


class TracingMiddleware(Middleware):
    """A producer span per enqueued task and a consumer span per run, linked by the task's `traceparent`.

    Give the same middleware to the producer's `Queue`/`AsyncQueue` and to the `Worker`
    (`delayed worker --middleware delayed.integrations.opentelemetry:TracingMiddleware`).

    The producer span starts before the task is written, as a child of the span current where `enqueue`
    is called, and ends once it is written (an error status if the enqueue raised). The consumer span is
    current while the function runs, so the spans the function starts are its children; a function that
    raises leaves the exception recorded on it and its status an error. A task retried after a failure
    runs each attempt in a span of its own, each a child of the one producer span.

    Args:
        tracer_provider: Where the spans go; default: OpenTelemetry's global provider (what
            `opentelemetry.trace.set_tracer_provider` set).

    Example:
        ```python
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from delayed import PyTask, Queue, connect
        from delayed.integrations.opentelemetry import TracingMiddleware

        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        queue = Queue("default", connect(), middleware=[TracingMiddleware(provider)])
        queue.enqueue(PyTask("operator:add", [1, 2]))
        print(spans.get_finished_spans()[0].name)  # send default
        ```
    """

    def __init__(self, tracer_provider: Optional[trace.TracerProvider] = None) -> None:
        self._tracer = trace.get_tracer(_INSTRUMENTATION, tracer_provider=tracer_provider)

    def before_enqueue(self, enqueuing: Enqueuing) -> None:
        """Start the producer span and carry its context in the task's headers."""
        task = enqueuing.task
        span = self._tracer.start_span(f"send {enqueuing.queue}", kind=SpanKind.PRODUCER, attributes={
            MESSAGING_SYSTEM: SYSTEM, DESTINATION: enqueuing.queue, OPERATION_TYPE: "send",
            OPERATION_NAME: "send", FUNC_PATH: task.func_path})
        enqueuing.state[self] = span
        carrier: Dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        if carrier:
            enqueuing.task = task.with_options(headers={**(task.options.headers or {}), **carrier})

    def after_enqueue(self, enqueuing: Enqueuing) -> None:
        """End the producer span: with the task's id once it has one, an error status if the enqueue raised."""
        span = enqueuing.state.pop(self, None)
        if span is None:  # a middleware before this one raised in before_enqueue
            return
        handle = enqueuing.handle
        task_id = handle.id if handle is not None else enqueuing.task.options.id
        if task_id is not None:
            span.set_attribute(MESSAGE_ID, task_id)
        if enqueuing.error is not None:
            span.record_exception(enqueuing.error)
            span.set_status(Status(StatusCode.ERROR, f"{type(enqueuing.error).__name__}: {enqueuing.error}"))
        span.end()

    @contextlib.contextmanager
    def around_call(self, call: Call) -> Iterator[None]:
        """Run the call in a consumer span, the child of its producer's (read from the task's headers)."""
        attributes: Dict[str, Union[str, int]] = {
            MESSAGING_SYSTEM: SYSTEM, DESTINATION: call.queue, OPERATION_TYPE: "process", OPERATION_NAME: "process",
            FUNC_PATH: call.func_path, ATTEMPT: call.attempt, CLIENT_ID: call.worker_id}
        if call.id is not None:
            attributes[MESSAGE_ID] = call.id
        parent = propagate.extract(call.headers)
        with self._tracer.start_as_current_span(f"process {call.queue}", context=parent, kind=SpanKind.CONSUMER,
                                                attributes=attributes):
            yield
