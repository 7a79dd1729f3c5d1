"""One OpenTelemetry trace from Python through Go to Python: a Python producer with TracingMiddleware
enqueues a GoTask; our Go worker (tracedgoworker: delayedotel.Middleware) runs it in a consumer span, and
its handler enqueues a PyTask with its ctx through a Queue using delayedotel.EnqueueMiddleware; a Python
worker with TracingMiddleware runs that. The traceparent rides in each task's headers."""
import json
import signal

import pytest
from conftest import WAIT, wait_for
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from delayed import GoTask, Queue, Worker
from delayed.integrations.opentelemetry import TracingMiddleware
from interop import gocommands


def test_a_trace_crosses_from_python_to_go_and_back(procs, conn, redis_server, tmp_path):
    if "tracedgoworker" in gocommands.unavailable:
        pytest.skip(f"!!! tracedgoworker not built: {gocommands.unavailable['tracedgoworker']} !!!")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingMiddleware(provider)
    spans_file = tmp_path / "go-spans.jsonl"
    go = procs.start("tracedgoworker", [gocommands.path("tracedgoworker"), "-url", redis_server.url,
                                        "-queue", "traced-go", "-py-queue", "traced-py", "-spans", str(spans_file)])

    Queue("traced-go", conn, middleware=[tracing]).enqueue(GoTask("main.Relay", ["tests.tasks:add", [1, 2]]))
    wait_for(lambda: conn.llen("traced-py") == 1, WAIT, "the Go handler's PyTask")
    Worker(Queue("traced-py", conn), ["tests.tasks"], middleware=[tracing], burst=True).run(handle_signals=False)

    go.signal(signal.SIGTERM)
    assert go.wait() == 0, go.err()
    go_spans = {span["kind"]: span for span in map(json.loads, spans_file.read_text().splitlines())}
    python = {span.kind: span for span in exporter.get_finished_spans()}
    py_send, py_process = python[SpanKind.PRODUCER], python[SpanKind.CONSUMER]
    go_process, go_send = go_spans["consumer"], go_spans["producer"]

    trace_id = f"{py_send.context.trace_id:032x}"
    assert {go_process["trace_id"], go_send["trace_id"], f"{py_process.context.trace_id:032x}"} == {trace_id}
    assert go_process["parent_span_id"] == f"{py_send.context.span_id:016x}"
    assert go_send["parent_span_id"] == go_process["span_id"]
    assert f"{py_process.parent.span_id:016x}" == go_send["span_id"]
    assert (py_send.name, go_process["name"], go_send["name"], py_process.name) == (
        "send traced-go", "process traced-go", "send traced-py", "process traced-py")
    assert go_process["attributes"]["messaging.delayed.func_path"] == "main.Relay"
    assert go_send["attributes"]["messaging.delayed.func_path"] == "tests.tasks:add"
