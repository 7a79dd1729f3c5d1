"""delayed.integrations.opentelemetry: producer and consumer spans, through a real Redis, into the OTel
SDK's in-memory exporter."""
import asyncio

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from delayed import AsyncQueue, DuplicateTaskError, PyTask, Queue, Worker, connect_async
from delayed.integrations.opentelemetry import TracingMiddleware

from .conftest import WORKER_TIMING

ALLOW = ["tests.tasks", "tests.integration_tasks"]


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, TracingMiddleware(provider), provider.get_tracer("test")
    provider.shutdown()


def drain(queue: Queue, middleware) -> None:
    Worker(queue, ALLOW, middleware=[middleware], burst=True, **WORKER_TIMING).run(handle_signals=False)


def named(exporter: InMemorySpanExporter, name: str):
    return [span for span in exporter.get_finished_spans() if span.name == name]


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None, f"{span.name} has no parent"
    return span.parent.span_id


def test_a_task_s_producer_span_is_the_parent_of_its_consumer_span_in_the_enqueuer_s_trace(conn, spans):
    exporter, tracing, tracer = spans
    queue = Queue("q", conn, middleware=[tracing])
    with tracer.start_as_current_span("request") as request:
        handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2], result_ttl=60))
    drain(queue, tracing)
    assert handle.result(timeout=5) == 3

    [send], [process] = named(exporter, "send q"), named(exporter, "process q")
    trace_id = request.get_span_context().trace_id
    assert send.context.trace_id == process.context.trace_id == trace_id
    assert parent_of(send) == request.get_span_context().span_id and parent_of(process) == send.context.span_id
    assert (send.kind, process.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert process.status.status_code == StatusCode.UNSET
    common = {"messaging.system": "delayed", "messaging.destination.name": "q", "messaging.message.id": handle.id,
              "messaging.delayed.func_path": "tests.tasks:add"}
    assert dict(send.attributes) == {**common, "messaging.operation.type": "send", "messaging.operation.name": "send"}
    attributes = dict(process.attributes)
    assert attributes.pop("messaging.client.id").startswith("delayed-")
    assert attributes == {**common, "messaging.operation.type": "process", "messaging.operation.name": "process",
                          "messaging.delayed.attempt": 0}


def test_the_task_carries_the_producer_span_s_context_beside_its_own_headers(conn, spans):
    exporter, tracing, _ = spans
    queue = Queue("q", conn, middleware=[tracing])
    queue.enqueue(PyTask("tests.tasks:add", [1, 2], headers={"tenant": "acme"}))
    [send] = named(exporter, "send q")
    headers = PyTask.deserialize(conn.lindex("q", 0)).options.headers
    context = send.get_span_context()
    assert headers == {"tenant": "acme", "traceparent": f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"}


@pytest.mark.parametrize("function", ["span_ids", "async_span_ids"])
def test_the_consumer_span_is_current_where_the_function_runs(conn, spans, function):
    """In a thread's function and in a coroutine, the function's own spans would be the consumer span's children."""
    exporter, tracing, _ = spans
    queue = Queue("q", conn)
    handle = queue.enqueue(PyTask(f"tests.integration_tasks:{function}", result_ttl=60))
    drain(queue, tracing)
    [process] = named(exporter, "process q")
    context = process.get_span_context()
    assert handle.result(timeout=5) == [f"{context.trace_id:032x}", f"{context.span_id:016x}"]


def test_each_failed_attempt_s_span_records_its_exception_under_the_one_producer_span(conn, spans):
    exporter, tracing, _ = spans
    queue = Queue("q", conn, middleware=[tracing])
    queue.enqueue(PyTask("tests.integration_tasks:fail", ["boom"], max_retries=1, backoff=0))
    drain(queue, tracing)
    [send], processes = named(exporter, "send q"), named(exporter, "process q")
    assert [span.attributes["messaging.delayed.attempt"] for span in processes] == [0, 1]
    for span in processes:
        assert parent_of(span) == send.context.span_id and span.context.trace_id == send.context.trace_id
        assert span.status.status_code == StatusCode.ERROR and span.status.description == "ValueError: boom fails"
        [event] = span.events
        assert event.name == "exception" and event.attributes["exception.type"] == "ValueError"


def test_a_task_enqueued_without_tracing_runs_in_a_root_consumer_span(conn, spans):
    exporter, tracing, _ = spans
    queue = Queue("q", conn)
    queue.enqueue(PyTask("tests.tasks:add", [1, 2]))
    drain(queue, tracing)
    [process] = exporter.get_finished_spans()
    assert process.name == "process q" and process.parent is None


def test_an_async_producer_traces_its_enqueues(redis_server, conn, spans):
    exporter, tracing, _ = spans

    async def enqueue():
        client = connect_async(redis_server.url)
        try:
            return await AsyncQueue("q", client, middleware=[tracing]).enqueue(PyTask("tests.tasks:add", [1, 2],
                                                                                      result_ttl=60))
        finally:
            await client.aclose()

    handle = asyncio.run(enqueue())
    drain(Queue("q", conn), tracing)
    [send], [process] = named(exporter, "send q"), named(exporter, "process q")
    assert send.attributes["messaging.message.id"] == handle.id and parent_of(process) == send.context.span_id


def test_an_enqueue_that_raises_ends_its_producer_span_with_the_error(conn, spans):
    exporter, tracing, _ = spans
    queue = Queue("q", conn, middleware=[tracing])
    queue.enqueue(PyTask("tests.tasks:add", [1, 2]), unique_for=60)
    with pytest.raises(DuplicateTaskError):
        queue.enqueue(PyTask("tests.tasks:add", [1, 2]), unique_for=60)
    written, refused = named(exporter, "send q")
    assert written.status.status_code == StatusCode.UNSET
    assert refused.status.status_code == StatusCode.ERROR
    assert refused.status.description.startswith("DuplicateTaskError: ")
    assert [event.attributes["exception.type"] for event in refused.events] == ["delayed.errors.DuplicateTaskError"]
