"""How long a failed task waits before its next attempt (retries with backoff)."""
import logging
import random
from typing import Any, Callable, Union

logger = logging.getLogger(__name__)

RetryBackoff = Union[None, float, str]
"""A task's backoff option: None (the default curve), seconds, or the 'module:func' path of a curve."""


def exponential_with_jitter(attempt: int) -> float:
    """Sidekiq's curve: attempt**4 + 15 s plus up to 10 * (attempt + 1) s of jitter
    (16-35 s after the first failure, 31-61 s after the second, about 5 minutes after the fourth)."""
    return attempt ** 4 + 15 + random.random() * 10 * (attempt + 1)


def backoff_seconds(backoff: RetryBackoff, attempt: int, resolve: Callable[[str], Callable[..., Any]]) -> float:
    """Seconds before attempt number `attempt` + 1: backoff is None (the default curve), a number
    of seconds, or the 'module:func' path of an allowed function called with the attempt number."""
    if backoff is None:
        return exponential_with_jitter(attempt)
    if not isinstance(backoff, str):
        return float(backoff)
    try:
        return float(resolve(backoff)(attempt))
    except Exception:
        logger.exception("backoff function %s failed; using the default curve", backoff)
        return exponential_with_jitter(attempt)
