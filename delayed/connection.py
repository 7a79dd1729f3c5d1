"""Connecting to Redis, and riding out the times it cannot be reached."""
import logging
import threading
from typing import Any, Callable, Optional
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
SOCKET_TIMEOUT = 10.0
"""Seconds a reply may take; above any BLPOP timeout we use, so a dead peer is noticed."""


def connect(url: str, **options: Any) -> redis.Redis:
    """A client for url with timeouts and keep-alive set, so lost connections surface as errors.

    redis-py's own retries are off: they would resend a command whose reply was lost
    (applying an enqueue twice, unseen) and hold a worker inside redis-py through an
    outage where a stop cannot reach it. The worker's Backoff is the one retry layer.
    """
    settings: dict = dict(socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=5, health_check_interval=30,
                          retry=Retry(NoBackoff(), 0))
    if not url.startswith("unix:"):
        settings["socket_keepalive"] = True  # TCP only: redis-py's unix socket connection refuses it
    settings.update(options)
    return redis.Redis.from_url(url, **settings)


def redacted(url: str) -> str:
    """url without its password, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class Backoff:
    """Sleeps that double after each consecutive Redis failure; logs the outage and the recovery once each.

    wait: how to sleep (an Event's wait, so a stop cuts the sleep short).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        initial: float = 0.1,
        maximum: float = 10.0,
        wait: Optional[Callable[[float], Any]] = None,
    ) -> None:
        self._logger = logger
        self._what = what
        self._initial = self._delay = initial
        self._maximum = maximum
        self._wait = wait or threading.Event().wait
        self.failing = False

    def failed(self, exc: Exception) -> None:
        if not self.failing:
            self._logger.warning("%s: Redis error (%s); retrying until it is back", self._what, exc)
            self.failing = True
        self._wait(self._delay)
        self._delay = min(self._delay * 2, self._maximum)

    def succeeded(self) -> None:
        if self.failing:
            self._logger.warning("%s: Redis is back", self._what)
            self.failing = False
            self._delay = self._initial
