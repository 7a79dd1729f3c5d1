"""Counting the work Redis did for a client, from SLOWLOG, rather than timing it: a loaded machine
blurs how long a command took, never what it did.

With every command logged, SLOWLOG holds each command a client sent and, just before it, each call
its script made (from Lua's client, whose address is "?:0"). An entry shows at most 32 arguments,
each cut at 128 bytes, and says how many more arguments, or bytes, there were.
"""
import contextlib
import re
from typing import Iterator, List, NamedTuple

import redis

SCRIPT_CLIENT = b"?:0"
"""The address SLOWLOG gives a script's own calls."""
WHOLE_READS = {b"hgetall", b"hkeys", b"hvals", b"hscan", b"smembers", b"sscan", b"zscan", b"scan", b"keys",
               b"lrange", b"zrange", b"zrangebyscore", b"sort"}
"""Commands whose work may grow with a whole key's size."""


class Sent(NamedTuple):
    """A command a client sent, and the calls its script made for it (none for a plain command)."""

    command: List[bytes]
    calls: List[List[bytes]]

    @property
    def arguments(self) -> int:
        """The arguments the command and its script's calls carried."""
        return arguments(self.command) + sum(map(arguments, self.calls))

    @property
    def bytes(self) -> int:
        """The bytes the command's and its script's calls' arguments carried."""
        return size(self.command) + sum(map(size, self.calls))


@contextlib.contextmanager
def every_command(conn: redis.Redis, most: int = 100_000) -> Iterator[None]:
    """Log every command (up to the last `most`) while in the block; SLOWLOG is reset first."""
    conn.config_set("slowlog-max-len", most)
    conn.config_set("slowlog-log-slower-than", 0)
    conn.slowlog_reset()
    try:
        yield
    finally:
        conn.config_set("slowlog-log-slower-than", 10_000)
        conn.config_set("slowlog-max-len", 128)


def sent(conn: redis.Redis) -> List[Sent]:
    """What clients sent since every_command began (SLOWLOG GET itself left out), oldest first."""
    entries = sorted(conn.execute_command("SLOWLOG", "GET", -1), key=lambda entry: entry[0])
    commands: List[Sent] = []
    calls: List[List[bytes]] = []
    for _, _, _, args, client, *_ in entries:
        if client == SCRIPT_CLIENT:
            calls.append(args)
        elif args[:1] != [b"SLOWLOG"]:
            commands.append(Sent(args, calls))
            calls = []
    assert not calls, calls  # every script's calls come before the command that ran it
    return commands


def arguments(args: List[bytes]) -> int:
    """The arguments of a SLOWLOG entry (past 32, the last one says how many more there were)."""
    more = re.fullmatch(rb"\.\.\. \((\d+) more arguments\)", args[-1]) if args else None
    return len(args) - 1 + int(more.group(1)) if more else len(args)


def size(args: List[bytes]) -> int:
    """The bytes of a SLOWLOG entry's arguments (an argument cut at 128 says how many more it had);
    the arguments past 32 are counted as empty."""
    total = 0
    for arg in args:
        more = re.search(rb"\.\.\. \((\d+) more bytes\)$", arg)
        total += more.start() + int(more.group(1)) if more else len(arg)
    return total
