"""Connecting to Redis, and riding out the times it cannot be reached."""
import copy
import functools
import itertools
import os
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..errors import RedisURLError, one_line
from . import redispy

URL_VARIABLE = "DELAYED_REDIS_URL"
"""The environment variable that names the Redis every command line and connect() use by default."""
DEFAULT_REDIS_URL = "redis://localhost:6379/0"
"""The Redis used when neither the caller nor URL_VARIABLE names one."""
SOCKET_TIMEOUT = 10.0
"""Seconds a reply may take; above any BLPOP timeout we use, so a dead peer is noticed."""


CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
SENTINEL_SCHEME = "redis+sentinel://"
SCHEMES = ("redis://", "rediss://", "unix://", *CLUSTER_SCHEMES, SENTINEL_SCHEME)
"""How the URLs connect() takes start (the first three are redis-py's own)."""
SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
"""Query options of a redis+sentinel:// URL for the sentinels themselves (the user info is the data nodes')."""


def configured_url() -> str:
    """The Redis URL in $DELAYED_REDIS_URL, else DEFAULT_REDIS_URL: what a process uses unless told otherwise."""
    return os.environ.get(URL_VARIABLE, DEFAULT_REDIS_URL)


def connect(url: Optional[str] = None, **options: Any) -> Any:
    """A client for the Redis at `url`, by default the one `$DELAYED_REDIS_URL` names, as the command line's.

    It is the client `python -m delayed.worker` and the `delayed` command build, with timeouts and
    TCP keep-alive set (a lost connection surfaces as an error) and redis-py's own retries off: they
    would resend a command whose reply was lost, applying an enqueue twice, unseen (a `Queue` sends
    each command once whatever client it gets). A `redis.Redis` connects on its first command; a
    `RedisCluster` reaches its nodes as it is made.

    Args:
        url: The Redis; by default `$DELAYED_REDIS_URL`, else `redis://localhost:6379/0`. One server:
            `redis://[user:password@]host:port/db`, `rediss://...` (TLS) or `unix:///path/redis.sock`
            (a `redis.Redis`). A cluster: `redis+cluster://[user:password@]host:port[,host:port...]`
            or `rediss+cluster://...` (a `redis.cluster.RedisCluster` that discovers the cluster
            from those nodes). Sentinel: `redis+sentinel://[user:password@]host:port[,host:port...]/MASTER_NAME[/db]`
            (a `redis.Redis` on the primary the sentinels name, which asks them again at most every
            half second while in use, so it follows a failover; the user info is the data nodes',
            the `sentinel_username` and `sentinel_password` query options the sentinels').
        **options: redis-py's connection options, as a URL's query options also give them
            (`socket_timeout=5`, `ssl_ca_certs="ca.crt"`).

    Returns:
        A `redis.Redis`, or a `redis.cluster.RedisCluster` for a cluster URL.

    Raises:
        RedisURLError: `url` does not parse (or starts with no scheme above); the message shows it
            with its passwords masked.
        redis.exceptions.RedisClusterException: A cluster URL none of whose nodes answers.

    Example:
        ```python
        from delayed import PyTask, Queue, connect

        queue = Queue("default", connect())  # $DELAYED_REDIS_URL, else redis://localhost:6379/0
        queue.enqueue(PyTask("tasks:add", [1, 2]))
        ```
    """
    url, settings = _settings(url, options, Retry(NoBackoff(), 0))
    if url.startswith(CLUSTER_SCHEMES):
        hosts, arguments = _cluster_arguments(url, settings)
        return redis.cluster.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(*host) for host in hosts],
                                          **arguments)
    if url.startswith(SENTINEL_SCHEME):
        hosts, master, sentinel_arguments, arguments = _sentinel_arguments(url, settings)
        return redis.sentinel.Sentinel(hosts, sentinel_kwargs=sentinel_arguments).master_for(
            master, connection_pool_class=_FollowingPool, **arguments)
    return _parsed(url, lambda: redis.Redis.from_url(url, **settings))


def connect_async(url: Optional[str] = None, **options: Any) -> Any:
    """`connect` for asyncio code: the same URLs, defaults and settings, as a `redis.asyncio` client.

    Give it to an `AsyncQueue`. For a cluster URL it is a `redis.asyncio.cluster.RedisCluster`,
    without retries as an `AsyncQueue` needs it; for a Sentinel URL, a client that follows a
    failover as `connect`'s does.

    Args:
        url: As for `connect`; by default `$DELAYED_REDIS_URL`, else `redis://localhost:6379/0`.
        **options: As for `connect`.

    Returns:
        A `redis.asyncio.Redis`, or a `redis.asyncio.cluster.RedisCluster` for a cluster URL.

    Raises:
        RedisURLError: `url` does not parse; the message shows it with its passwords masked.

    Example:
        ```python
        from delayed import AsyncQueue, PyTask, connect_async

        queue = AsyncQueue("default", connect_async())
        await queue.enqueue(PyTask("tasks:add", [1, 2]))
        ```
    """
    url, settings = _settings(url, options, redis.asyncio.retry.Retry(NoBackoff(), 0))
    if url.startswith(CLUSTER_SCHEMES):
        hosts, arguments = _cluster_arguments(url, settings)
        if arguments.pop("connection_class", None) is not None:  # rediss+cluster://: redis-py's sync class
            arguments["ssl"] = True
        return redis.asyncio.cluster.RedisCluster(
            startup_nodes=[redis.asyncio.cluster.ClusterNode(*host) for host in hosts], **arguments)
    if url.startswith(SENTINEL_SCHEME):
        hosts, master, sentinel_arguments, arguments = _sentinel_arguments(url, settings)
        return redis.asyncio.sentinel.Sentinel(hosts, sentinel_kwargs=sentinel_arguments).master_for(
            master, connection_pool_class=_AsyncFollowingPool, **arguments)
    return _parsed(url, lambda: redis.asyncio.Redis.from_url(url, **settings))


def _settings(url: Optional[str], options: Dict[str, Any], retry: Any) -> Tuple[str, Dict[str, Any]]:
    """The URL to connect to (url, else the configured one), checked for a scheme we take, and the
    client settings for it: ours, with retry as its retry policy, overridden by options."""
    url = configured_url() if url is None else url
    if not url.startswith(SCHEMES):
        raise RedisURLError(f"{redacted(url) or 'an empty URL'}: a Redis URL starts with one of {', '.join(SCHEMES)}")
    if misplaced_password(url):
        raise RedisURLError(f"{redacted(url)}: its password holds a '/': percent-encode it as %2F")
    if url.startswith(("redis://", "rediss://")) and not _database(url).isdigit():
        raise RedisURLError(f"{redacted(url)}: the path names a database by its number, as /0")
    settings: Dict[str, Any] = dict(socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=5, health_check_interval=30,
                                    retry=retry)
    if not url.startswith("unix:"):
        settings["socket_keepalive"] = True  # TCP only: redis-py's unix socket connection refuses it
    settings.update(options)
    return url, settings


def _database(url: str) -> str:
    """The database a redis:// or rediss:// URL's path names ("0" when it names none), as redis-py
    reads it; redis-py would quietly use database 0 for a path that is no number."""
    try:
        path = urlsplit(url).path
    except ValueError:  # redis-py says what is wrong with it
        return "0"
    return unquote(path).replace("/", "") or "0"


def _parsed(url: str, make: Callable[[], Any]) -> Any:
    """make(), a client redis-py builds from url, or RedisURLError if redis-py cannot parse url."""
    try:
        return make()
    except ValueError as exc:
        raise unparsable(url, exc) from None


def unparsable(url: str, exc: Exception) -> RedisURLError:
    """The error for a url redis-py could not parse (or connect with, for options it took): the URL
    redacted, with redis-py's words only when the URL holds no password (they may quote a piece of it)."""
    detail = "" if secrets_of(url) else f" ({exc})"
    return RedisURLError(f"{redacted(url)}{detail}")


def _cluster_arguments(url: str, settings: Dict[str, Any]) -> Tuple[List[Tuple[str, int]], Dict[str, Any]]:
    """A cluster URL's nodes, and the arguments of a RedisCluster on them: settings, then the URL's own."""
    hosts, path, kwargs = _split(url, "rediss" if url.startswith("rediss+") else "redis")
    if path.strip("/") not in ("", "0"):
        raise RedisURLError(f"{redacted(url)}: a cluster has no databases but 0; leave the path out")
    for name in ("db", "host", "port"):
        kwargs.pop(name, None)
    return hosts, {**settings, **kwargs}


def _sentinel_arguments(url: str, settings: Dict[str, Any]) -> Tuple[List[Tuple[str, int]], str, Dict[str, Any],
                                                                      Dict[str, Any]]:
    """A Sentinel URL's sentinels, its master's name, the arguments of the sentinels' clients, and
    those of the client on the primary: settings, then the URL's own."""
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
    return hosts, master, sentinel_kwargs, {**settings, **kwargs}


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


class _Following:
    """What a Sentinel pool that asks the sentinels who the primary is at most every FOLLOW_INTERVAL
    seconds as connections are taken (_FollowingPool, _AsyncFollowingPool) keeps: when to ask next.

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


class _FollowingPool(_Following, redis.sentinel.SentinelConnectionPool):
    """connect()'s pool for a redis+sentinel:// URL: follows the primary (see _Following)."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._asks_now():
            try:
                self.get_master_address()  # closes the idle connections if the primary moved
            except (redis.RedisError, OSError):
                pass
        return super().get_connection(*args, **kwargs)


class _AsyncFollowingPool(_Following, redis.asyncio.sentinel.SentinelConnectionPool):
    """connect_async()'s pool for a redis+sentinel:// URL: follows the primary (see _Following)."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._asks_now():
            try:
                await self.get_master_address()  # closes the idle connections if the primary moved
            except (redis.RedisError, OSError):
                pass
        return await super().get_connection(*args, **kwargs)


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

