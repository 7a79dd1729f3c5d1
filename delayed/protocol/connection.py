"""Connecting to Redis, and riding out the times it cannot be reached."""
import copy
import functools
import itertools
import re
import time
from typing import Any, Callable, Dict, List, Optional, TypeVar
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import one_line
from . import redispy

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
SOCKET_TIMEOUT = 10.0
"""Seconds a reply may take; above any BLPOP timeout we use, so a dead peer is noticed."""


CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
SENTINEL_SCHEME = "redis+sentinel://"
SCHEMES = ("redis://", "rediss://", "unix://", *CLUSTER_SCHEMES, SENTINEL_SCHEME)
"""How the URLs connect() takes start (the first three are redis-py's own)."""
SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
"""Query options of a redis+sentinel:// URL for the sentinels themselves (the user info is the data nodes')."""


class RedisURLError(ValueError):
    """A Redis URL that does not parse; the message shows the URL redacted, never a password."""


def connect(url: str, **options: Any) -> Any:
    """A client for url with timeouts and keep-alive set, so lost connections surface as errors.

    url: redis://, rediss:// or unix:// (one server: a redis.Redis);
    redis+cluster://[user:password@]host:port[,host:port...][?options] or rediss+cluster:// (a
    redis.cluster.RedisCluster that discovers the cluster from those nodes); or
    redis+sentinel://[user:password@]host:port[,host:port...]/MASTER_NAME[/db][?options] (a
    redis.Redis on the primary the sentinels name, found again after a failover; the user info is
    the data nodes', sentinel_username and sentinel_password options are the sentinels'). Any other
    scheme: RedisURLError, naming these.
    options: query options as redis-py's URLs take them (socket_timeout=5, ssl_ca_certs=...).

    redis-py's own retries are off: they would resend a command whose reply was lost
    (applying an enqueue twice, unseen) and hold a worker inside redis-py through an
    outage where a stop cannot reach it. The roles' OutageBackoff is the one retry layer.
    """
    if not url.startswith(SCHEMES):
        raise RedisURLError(f"{redacted(url) or 'an empty URL'}: a Redis URL starts with one of {', '.join(SCHEMES)}")
    settings: dict = dict(socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=5, health_check_interval=30,
                          retry=Retry(NoBackoff(), 0))
    if not url.startswith("unix:"):
        settings["socket_keepalive"] = True  # TCP only: redis-py's unix socket connection refuses it
    settings.update(options)
    if url.startswith(CLUSTER_SCHEMES):
        return _cluster(url, settings)
    if url.startswith(SENTINEL_SCHEME):
        return _sentinel(url, settings)
    return redis.Redis.from_url(url, **settings)


def _cluster(url: str, settings: dict) -> redis.cluster.RedisCluster:
    hosts, path, kwargs = _split(url, "rediss" if url.startswith("rediss+") else "redis")
    if path.strip("/") not in ("", "0"):
        raise RedisURLError(f"{redacted(url)}: a cluster has no databases but 0; leave the path out")
    kwargs.pop("db", None)
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    retry = settings.pop("retry")
    return redis.cluster.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(host, port) for host, port in hosts],
                                      retry=retry, **{**settings, **kwargs})


def _sentinel(url: str, settings: dict) -> redis.Redis:
    hosts, path, kwargs = _split(url, "redis")
    master, _, db = path.strip("/").partition("/")
    if not master or "/" in db or not (db or "0").isdigit():
        raise RedisURLError(f"{redacted(url)}: give the master's name after the sentinels: "
                            "redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db]")
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    kwargs["db"] = int(db or 0)
    sentinel_kwargs = {key: value for key, value in {**settings, **kwargs}.items()
                       if key.startswith("socket_") or key in ("retry", "health_check_interval")}
    for option in SENTINEL_OPTIONS:
        if option in kwargs:
            sentinel_kwargs[option.replace("sentinel_", "")] = kwargs.pop(option)
    sentinel = redis.sentinel.Sentinel(hosts, sentinel_kwargs=sentinel_kwargs)
    return sentinel.master_for(master, connection_pool_class=_FollowingPool, **{**settings, **kwargs})


def ping(client: Any) -> None:
    """Have client connect and answer a PING: redis-py connects lazily, so a wrong address or password,
    or a Redis that cannot be reached, raises here rather than at the first real command."""
    client.ping()


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


class _FollowingPool(redis.sentinel.SentinelConnectionPool):
    """A Sentinel pool that asks the sentinels who the primary is at most every FOLLOW_INTERVAL
    seconds as connections are taken, and drops its connections to a server they no longer name.

    redis-py asks only when a connection connects: after a failover that left the old primary
    running (SENTINEL FAILOVER, a network split), connected clients go on writing to it until the
    sentinels demote it, seconds later (they reconfigure it about 8 s after they notice), and Redis
    then throws those writes away. Idle connections to it are closed here; one in use is closed as
    it comes back (redis-py's SentinelConnectionPool.owns_connection). A question the sentinels do
    not answer is left to the next connect, as before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_check = time.monotonic() + FOLLOW_INTERVAL

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if self.is_master and now >= self._next_check:
            self._next_check = now + FOLLOW_INTERVAL
            try:
                self.get_master_address()  # closes the idle connections if the primary moved
            except (redis.RedisError, OSError):
                pass
        return super().get_connection(*args, **kwargs)


_HOST = re.compile(r"^(?:\[(?P<ipv6>[0-9a-fA-F:.]+)\]|(?P<name>[^:\[\]]+)):(?P<port>\d{1,5})$")


def _split(url: str, scheme: str) -> Any:
    """A multi-host URL's (host, port) pairs, its path, and what redis-py makes of the rest (user,
    password, query options), parsed as the single-host URL of its first host."""
    rest = url.partition("://")[2]
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    user_info, at, host_list = netloc.rpartition("@")
    hosts = []
    for text in host_list.split(","):
        match = _HOST.match(text)
        if not match:
            raise RedisURLError(f"{redacted(url)}: name each node as host:port, separated by commas "
                                f"(got {text!r})")
        hosts.append((match["ipv6"] or match["name"], int(match["port"])))
    single = f"{scheme}://{user_info}{at}127.0.0.1:1{slash}{path}" + (f"?{query}" if query else "")
    try:
        kwargs = redis.connection.parse_url(single)
    except ValueError as exc:
        raise RedisURLError(f"{redacted(url)}: {scrubbed(str(exc), url)}") from None
    return hosts, slash + path, kwargs


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


def is_cluster(client: Any) -> bool:
    """Whether client talks to a Redis Cluster (sync or asyncio)."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


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


def redacted(url: str) -> str:
    """url without its password, for logs and error messages; never raises, whatever url is.

    Everything between "://" and the last "@" is the user info (a password may hold "@", ":" or
    "/"): the part after its first ":" is masked, or all of it when it has no ":" (a lone
    password). Values of `password=` and `sentinel_password=` query parameters are masked too.
    """
    scheme, separator, rest = url.partition("://")
    user_info, at, host = rest.rpartition("@")
    if at:
        user, colon, _ = user_info.partition(":")
        rest = (user + ":***" if colon else "***") + "@" + host
    return _PASSWORD_PARAMETER.sub(r"\1***", scheme + separator + rest)


_PASSWORD_PARAMETER = re.compile(r"([?&](?:sentinel_)?password=)[^&#]*", re.IGNORECASE)


def secrets_of(url: str) -> List[str]:
    """The passwords url holds, as written and percent-decoded, longest first: to scrub from messages."""
    found = []
    user_info, at, _ = url.partition("://")[2].rpartition("@")
    if at:
        user, colon, password = user_info.partition(":")
        found.append(password if colon else user)
    found += [match.group(1) for match in re.finditer(r"[?&](?:sentinel_)?password=([^&#]*)", url, re.IGNORECASE)]
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


_PIPELINE_COMMAND = re.compile(r"Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)


def refused_for_memory(exc: BaseException) -> bool:
    """Redis refused the command for want of memory (at maxmemory, evicting nothing): an OOM reply, or
    a MULTI whose EXEC it refused so (EXECABORT, when memory ran out after its commands were queued)."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.exceptions.ExecAbortError) and "OOM" in str(exc))


def error_text(exc: BaseException) -> str:
    """A Redis error for a log line or a page: one line, without the command redis-py quotes when a
    pipeline's command fails (a task's bytes may be among its arguments), and a refusal for want of
    memory said as such."""
    text = one_line(_PIPELINE_COMMAND.sub("", str(exc)), 1000)
    if refused_for_memory(exc):
        return f"Redis is full: {text}"
    return text or type(exc).__name__

