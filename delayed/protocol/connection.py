"""Connecting to Redis: the URL a process uses ($DELAYED_REDIS_URL, the command lines' --redis-url), and
the client connect() and connect_async() build from a URL, its passwords kept out of every error."""
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple
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

from ..errors import RedisURLError
from .redaction import redacted, scrubbed, secrets_of
from .sentinels import AsyncFollowingPool, FollowingPool

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
            master, connection_pool_class=FollowingPool, **arguments)
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
            master, connection_pool_class=AsyncFollowingPool, **arguments)
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


def misplaced_password(url: str) -> bool:
    """Whether url's password holds a "/": redis-py would end the host there, take a piece of the
    password for the host or port (and show it in its errors), and connect somewhere else."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return "@" not in parts.netloc and "@" in parts.path


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


def is_cluster(client: Any) -> bool:
    """Whether client talks to a Redis Cluster (sync or asyncio)."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))
