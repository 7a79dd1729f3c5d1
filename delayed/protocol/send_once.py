"""Each command sent once: a client on the caller's connection pools (or cluster nodes) with redis-py's
retries off, which would resend a command whose reply was lost and could apply an enqueue twice."""
import copy
import functools
import itertools
from typing import Any, Callable, Dict, Optional, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import redispy

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


def _on_pool(client: Client, base: Callable[..., Client], pool: _Lending) -> Client:
    """A shallow copy of client (its class and what a subclass keeps on it, so its overrides work)
    with all that redis-py's own constructor, base(connection_pool=pool), sets made anew: on pool,
    never a single connection of its own, never closing the pool, redis-py's response callbacks."""
    view = copy.copy(client)
    vars(view).update(vars(base(connection_pool=pool)))
    return view


REDIRECTS = (redis.exceptions.MovedError, redis.exceptions.AskError, redis.exceptions.TryAgainError)
"""A cluster node's refusals that name who serves the slot, or ask to come back: nothing was applied."""
TRANSACTION_REDIRECTS = 3
"""How often a MULTI/EXEC refused by a redirect is sent again, to the node the refreshed slot table names."""


class _RedirectsOnly(Retry):
    """The retry policy of a sent-once cluster view. redis-py asks get_retries() how often to send a
    command or a pipeline again after a lost connection: never. A transaction runs through
    call_with_retry: sent again only after a redirect (inside MULTI, a redirect aborts the whole EXEC:
    nothing was applied), with the slot table refreshed first; redis-py adds the connection errors
    to retry on through update_supported_errors: ignored here."""

    def __init__(self, nodes_manager: Any) -> None:
        super().__init__(NoBackoff(), TRANSACTION_REDIRECTS, REDIRECTS)
        self.nodes_manager = nodes_manager

    def get_retries(self) -> int:
        return 0

    def update_supported_errors(self, specified_errors: Any) -> None:
        pass

    def call_with_retry(self, do: Callable[[], Any], fail: Callable[..., Any],
                        is_retryable: Optional[Callable[[Exception], bool]] = None,
                        with_failure_count: bool = False) -> Any:
        for failures in itertools.count(1):
            try:
                return do()
            except REDIRECTS as error:
                if is_retryable and not is_retryable(error):
                    raise
                if with_failure_count:
                    fail(error, failures)
                else:
                    fail(error)
                self.nodes_manager.initialize()
                if failures > TRANSACTION_REDIRECTS:
                    raise


def _cluster_view(client: redis.cluster.RedisCluster) -> redis.cluster.RedisCluster:
    """A copy of a RedisCluster on its nodes and pools that never resends a command whose reply was lost.

    A RedisCluster retries above its pools: `retry` counts how often a command is sent again after a
    ConnectionError, TimeoutError or CLUSTERDOWN, after its topology was refreshed. The view has none
    (_RedirectsOnly); each node's connections already have none (redis-py sets them so). What stays:
    a command refused with MOVED, ASK or TRYAGAIN is sent to the node named (redis-py does that below
    `retry`: the node applied nothing); a transaction refused by a redirect is sent again (up to
    TRANSACTION_REDIRECTS times); a non-transactional pipeline resends the commands a redirect
    refused, never those of a node whose connection was lost (redis-py would: we raise that error).
    CLUSTERDOWN and connection errors reach the caller, whose retries decide.

    The view shares the client's nodes manager, so it must not close it when it is garbage
    collected (RedisCluster.__del__ does: every node's connections closed and the default node
    forgotten, which broke the caller's client as soon as a Queue on it was dropped): see
    redispy.unowned_copy.
    """
    view = redispy.unowned_copy(client)
    view.set_retry(_RedirectsOnly(view.nodes_manager))
    view.pipeline = functools.partial(_sent_once_pipeline, view, type(client).pipeline)  # type: ignore[method-assign]
    return view


def _sent_once_pipeline(view: Any, pipeline: Callable[..., Any], transaction: Any = None, shard_hint: Any = None) -> Any:
    """view's pipeline: a transaction follows view's retry policy; a non-transactional one gets back
    the error of a command whose connection was lost, instead of sending it again."""
    pipe = pipeline(view, transaction, shard_hint)
    if not transaction:
        redispy.wrap_resend(pipe, functools.partial(_resend_if_redirected, pipe))
    return pipe


def _resend_if_redirected(pipe: Any, resend: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """Send again a command a node refused with a redirect; a command whose connection was lost
    (its reply, and maybe it, are gone) gets that error back instead."""
    for command in redispy.pipeline_commands(pipe):
        if tuple(command.args) == args and isinstance(command.result, (redis.ConnectionError, redis.TimeoutError)):
            raise command.result
    return resend(*args, **options)


def _refuse_resending_cluster(client: Any) -> None:
    """An asyncio cluster client retries at its own level, outside any pool: it must come with none."""
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
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
    A redis.cluster.RedisCluster gets a view of its own kind (see _cluster_view).
    """
    if isinstance(client, redis.Redis):
        return _on_pool(client, redis.Redis, _LendingPool(client.connection_pool))
    if isinstance(client, redis.cluster.RedisCluster):
        return _cluster_view(client)
    return client


def sent_once_async(client: redis.asyncio.Redis) -> redis.asyncio.Redis:
    """sent_once for a redis.asyncio client."""
    if isinstance(client, redis.asyncio.Redis):
        return _on_pool(client, redis.asyncio.Redis, _AsyncLendingPool(client.connection_pool))
    _refuse_resending_cluster(client)
    return client
