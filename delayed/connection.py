"""Connecting to Redis, and riding out the times it cannot be reached."""
import asyncio
import copy
import logging
import re
import threading
from typing import Any, Callable, Dict, List, Optional, TypeVar
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
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


NO_RESEND = Retry(NoBackoff(), 0)
"""The retry policy of a connection while a queue holds it: a command is sent once."""


class _Lending:
    """Lends a pool's connections with NO_RESEND as their retry policy, and puts each one's own back
    before it returns to the pool. A connection is the borrower's alone between the two (that is
    the pool's contract), so no other user of the pool ever sees the swap."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._own: Dict[Any, Any] = {}

    def lend(self, connection: Any) -> Any:
        self._own[connection] = connection.retry
        connection.retry = NO_RESEND
        return connection

    def take_back(self, connection: Any) -> None:
        own = self._own.pop(connection, None)
        if own is not None and connection.retry is NO_RESEND:  # else someone called set_retry meanwhile
            connection.retry = own

    def __getattr__(self, name: str) -> Any:  # everything else is the pool's own
        return getattr(self._pool, name)

    def __repr__(self) -> str:
        return f"<sent once: {self._pool!r}>"


class _LendingPool(_Lending):
    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        return self.lend(self._pool.get_connection(*args, **kwargs))  # connected with the pool's retries

    def release(self, connection: Any) -> None:
        self.take_back(connection)
        self._pool.release(connection)


class _AsyncLendingPool(_Lending):
    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        return self.lend(await self._pool.get_connection(*args, **kwargs))

    async def release(self, connection: Any) -> None:
        self.take_back(connection)
        await self._pool.release(connection)


Client = TypeVar("Client", redis.Redis, redis.asyncio.Redis)


def _view(client: Client, pool: _Lending, new_lock: Callable[[], Any]) -> Client:
    """A shallow copy of client (its class, so a subclass's overrides stay, and its settings) on
    pool, owning its mutable parts: never a single connection of its own, never closing the pool."""
    view = copy.copy(client)
    view.connection_pool = pool  # type: ignore[assignment]
    view.connection = None
    view.auto_close_connection_pool = False
    view.response_callbacks = copy.copy(client.response_callbacks)
    for flag in ("_single_connection_client", "single_connection_client"):  # sync, asyncio
        if hasattr(view, flag):
            setattr(view, flag, False)
    for lock in ("single_connection_lock", "_single_conn_lock", "_usage_lock"):
        if hasattr(view, lock):
            setattr(view, lock, new_lock())
    if hasattr(view, "_usage_counter"):
        view._usage_counter = 0
    return view


def _refuse_resending_cluster(client: Any) -> None:
    """A cluster client retries at its own level, outside any pool: it must come with none."""
    if isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)):
        retry = getattr(client, "retry", None)
        if retry is not None and retry.get_retries() != 0:
            raise TypeError(
                "this RedisCluster resends a command whose reply was lost, which could enqueue a task twice: "
                "create it with retry=Retry(NoBackoff(), 0)"
            )


def sent_once(client: redis.Redis) -> redis.Redis:
    """A client on client's own connection pool that never resends a command.

    redis-py resends a command after a connection error or timeout when its connections have a
    retry policy (since redis-py 6, `redis.Redis()` gives them one by default: 10 retries in 8.1), though Redis may have applied it and only the reply was lost:
    an enqueue would land twice, a unique enqueue would find its own lock. The retry policy
    lives on each pooled connection (from the pool's connection_kwargs), so the client returned
    here borrows the same connections, with their retries off only while it holds one: the
    caller's client, its pool and its settings (Sentinel, TLS, limits) are used as they are, and
    its own commands keep its retries. Connecting still follows them (a connect sends nothing).
    A command whose reply is lost raises ConnectionError or TimeoutError: it may have landed.
    """
    if isinstance(client, redis.Redis):
        return _view(client, _LendingPool(client.connection_pool), threading.RLock)
    _refuse_resending_cluster(client)
    return client


def sent_once_async(client: redis.asyncio.Redis) -> redis.asyncio.Redis:
    """sent_once for a redis.asyncio client."""
    if isinstance(client, redis.asyncio.Redis):
        return _view(client, _AsyncLendingPool(client.connection_pool), asyncio.Lock)
    _refuse_resending_cluster(client)
    return client


def redacted(url: str) -> str:
    """url without its password, for logs and error messages; never raises, whatever url is.

    Everything between "://" and the last "@" is the user info (a password may hold "@", ":" or
    "/"): the part after its first ":" is masked, or all of it when it has no ":" (a lone
    password). Values of a `password=` query parameter are masked too.
    """
    scheme, separator, rest = url.partition("://")
    user_info, at, host = rest.rpartition("@")
    if at:
        user, colon, _ = user_info.partition(":")
        rest = (user + ":***" if colon else "***") + "@" + host
    return _PASSWORD_PARAMETER.sub(r"\1***", scheme + separator + rest)


_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def secrets_of(url: str) -> List[str]:
    """The passwords url holds, as written and percent-decoded, longest first: to scrub from messages."""
    found = []
    user_info, at, _ = url.partition("://")[2].rpartition("@")
    if at:
        user, colon, password = user_info.partition(":")
        found.append(password if colon else user)
    found += [match.group(1) for match in re.finditer(r"[?&]password=([^&#]*)", url, re.IGNORECASE)]
    found += [unquote(secret) for secret in found]
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def misplaced_password(url: str) -> bool:
    """Whether url's password holds a "/": redis-py would end the host there, take a piece of the
    password for the host or port (and show it in its errors), and connect somewhere else."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return "@" not in parts.netloc and "@" in parts.path


def scrubbed(text: str, url: str) -> str:
    """text (an error message about url) with every password of url masked."""
    for secret in secrets_of(url):
        text = text.replace(secret, "***")
    return text


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
