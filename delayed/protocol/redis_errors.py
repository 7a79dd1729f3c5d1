"""What Redis's errors mean, and how to show them: a refusal for want of memory or of credentials,
and an error as one line for a log or a page."""
import re

import redis

from ..errors import one_line

_PIPELINE_COMMAND = re.compile(r"Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)


def refused_for_memory(exc: BaseException) -> bool:
    """Redis refused the command for want of memory (at maxmemory, evicting nothing): an OOM reply, or
    a MULTI whose EXEC it refused so (EXECABORT, when memory ran out after its commands were queued)."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.exceptions.ExecAbortError) and "OOM" in str(exc))


_REFUSED_CREDENTIALS = ("WRONGPASS", "NOAUTH", "invalid password", "invalid username-password pair",
                        "Authentication required", "called without any password configured", "no password is set")
"""What Redis's replies say when it refuses a client's credentials (redis-py raises most of them as
AuthenticationError; a cluster's start wraps them in a RedisClusterException)."""


def refused_credentials(exc: BaseException) -> bool:
    """Redis answered and refused the credentials: a wrong or missing password, an unknown or disabled
    ACL user, or a password a server without one does not take."""
    refusals = (redis.exceptions.AuthenticationError, redis.exceptions.AuthenticationWrongNumberOfArgsError)
    return isinstance(exc, refusals) or any(marker in str(exc) for marker in _REFUSED_CREDENTIALS)


def error_text(exc: BaseException) -> str:
    """A Redis error for a log line or a page: one line, without the command redis-py quotes when a
    pipeline's command fails (a task's bytes may be among its arguments), and a refusal for want of
    memory said as such."""
    text = one_line(_PIPELINE_COMMAND.sub("", str(exc)), 1000)
    if refused_for_memory(exc):
        return f"Redis is full: {text}"
    return text or type(exc).__name__
