"""Task functions the integrations' tests allow: what tracing and error reporting see from inside a call."""
import sentry_sdk
from opentelemetry import trace


def span_ids():
    """The trace and span ids of the span current while this runs, in hex (a tracked task's result)."""
    context = trace.get_current_span().get_span_context()
    return [format(context.trace_id, "032x"), format(context.span_id, "016x")]


async def async_span_ids():
    """span_ids, from a coroutine."""
    return span_ids()


def fail(tag):
    raise ValueError(f"{tag} fails")


def report(message):
    """Report a message to Sentry itself (not an error: the task succeeds)."""
    sentry_sdk.capture_message(message)
