"""Redis Sentinel: the pools of connect()'s clients for a redis+sentinel:// URL, which follow the primary
through a failover, and what the sentinels say when they name no primary."""
import time
from typing import Any

import redis
import redis.asyncio.sentinel
import redis.sentinel


def sentinels_say(client: Any) -> str:
    """What each sentinel of client (a connect() of a redis+sentinel:// URL) says of its master, in
    one line: why they name no primary. redis-py's MasterNotFoundError shows their client objects,
    not their errors, and nothing for a master they do not know."""
    pool = client.connection_pool
    answers = []
    for sentinel in pool.sentinel_manager.sentinels:
        where = "{host}:{port}".format(**sentinel.connection_pool.connection_kwargs)
        answers.append(f"{where}: {_master_state(sentinel, pool.service_name)}")
    return f"no sentinel names a primary for {pool.service_name!r} ({'; '.join(answers)})"


def _master_state(sentinel: redis.Redis, name: str) -> str:
    """What one sentinel says of the master name: its address and flags, or the error it gives."""
    try:
        state: Any = sentinel.sentinel_master(name)
    except (redis.RedisError, OSError) as exc:
        return str(exc)
    flags = state["flags"]  # "master,s_down" (RESP2), or a set of them (RESP3)
    return f"sees it at {state['ip']}:{state['port']} as {flags if isinstance(flags, str) else ','.join(sorted(flags))}"


FOLLOW_INTERVAL = 0.5
"""Seconds between two questions to the sentinels, "which server is the primary?", while a client is in use."""


class _Following:
    """What a Sentinel pool that asks the sentinels who the primary is at most every FOLLOW_INTERVAL
    seconds as connections are taken (FollowingPool, AsyncFollowingPool) keeps: when to ask next.

    redis-py asks only when a connection connects: after a failover that left the old primary
    running (SENTINEL FAILOVER, a network split), connected clients go on writing to it until the
    sentinels demote it, seconds later (they reconfigure it about 8 s after they notice), and Redis
    then throws those writes away. Asking (the pool's get_master_address) closes its idle
    connections to a server the sentinels no longer name; one in use is closed as it comes back
    (redis-py's SentinelConnectionPool.owns_connection). A question the sentinels do not answer is
    left to the next connect, as before."""
    is_master: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_check = time.monotonic() + FOLLOW_INTERVAL

    def _asks_now(self) -> bool:
        """Whether to ask the sentinels as this connection is taken (then not again for FOLLOW_INTERVAL)."""
        now = time.monotonic()
        if not self.is_master or now < self._next_check:
            return False
        self._next_check = now + FOLLOW_INTERVAL
        return True


class FollowingPool(_Following, redis.sentinel.SentinelConnectionPool):
    """connect()'s pool for a redis+sentinel:// URL: follows the primary (see _Following)."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._asks_now():
            try:
                self.get_master_address()  # closes the idle connections if the primary moved
            except (redis.RedisError, OSError):
                pass
        return super().get_connection(*args, **kwargs)


class AsyncFollowingPool(_Following, redis.asyncio.sentinel.SentinelConnectionPool):
    """connect_async()'s pool for a redis+sentinel:// URL: follows the primary (see _Following)."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._asks_now():
            try:
                await self.get_master_address()  # closes the idle connections if the primary moved
            except (redis.RedisError, OSError):
                pass
        return await super().get_connection(*args, **kwargs)
