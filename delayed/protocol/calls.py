"""Plans and their two executors: how Queue and AsyncQueue (and their task handles) share one body.

A plan is a generator that yields each round trip it needs as data (a `Command`, a `Pipeline`, a
`RunScript`, or a `Sleep` between two of them) and is sent back the reply; what it returns is the
operation's result. Everything an operation decides (which script, which MULTI, what a reply means,
which error it becomes) is written once, in its plan. Running it is the executors' one job:
`Executor` sends each call with redis-py, `AsyncExecutor` awaits it with redis.asyncio. An error a
call raises is thrown into the plan where it yielded, so a plan's own `with` and `try` see it.
"""
import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Generator, Mapping, Optional, Tuple, TypeVar, Union

from ..wire.keys import QueueKeys
from .scripts import Script, Scripts

T = TypeVar("T")


@dataclass(frozen=True)
class Command:
    """One command, by its redis-py method: `name(*args, **options)`; its reply is redis-py's."""

    name: str
    args: Tuple[Any, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pipeline:
    """Commands sent in one round trip, inside MULTI/EXEC when transaction; the reply is the list of theirs."""

    commands: Tuple[Command, ...]
    transaction: bool = True


@dataclass(frozen=True)
class RunScript:
    """One Lua script of lua/, on the queue's keys, with its header's names as arguments."""

    script: Script
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Sleep:
    """No round trip: wait this many seconds (time.sleep, or asyncio.sleep), then go on; the reply is None."""

    seconds: float


Call = Union[Command, Pipeline, RunScript, Sleep]
Plan = Generator[Call, Any, T]
"""A plan yields calls, is sent each one's reply, and returns its result."""


class Executor:
    """Runs plans on a redis-py client, one call at a time."""

    def __init__(self, conn: Any, keys: QueueKeys) -> None:
        self.conn = conn
        self._scripts = Scripts(conn, keys)

    def run(self, plan: Plan[T]) -> T:
        """Send each call the plan yields and return what it returns; a call's error is thrown into it."""
        reply: Any = None
        error: Optional[Exception] = None
        while True:
            try:
                call = plan.send(reply) if error is None else plan.throw(error)
            except StopIteration as done:
                return done.value
            try:
                reply, error = self._send(call), None
            except Exception as exc:
                reply, error = None, exc

    def _send(self, call: Call) -> Any:
        if isinstance(call, Command):
            return getattr(self.conn, call.name)(*call.args, **call.options)
        if isinstance(call, Pipeline):
            with self.conn.pipeline(transaction=call.transaction) as pipe:
                for command in call.commands:
                    getattr(pipe, command.name)(*command.args, **command.options)
                return pipe.execute()
        if isinstance(call, RunScript):
            return self._scripts[call.script](**call.args)
        time.sleep(call.seconds)
        return None


class AsyncExecutor:
    """Runs plans on a redis.asyncio client, awaiting one call at a time."""

    def __init__(self, conn: Any, keys: QueueKeys) -> None:
        self.conn = conn
        self._scripts = Scripts(conn, keys)

    async def run(self, plan: Plan[T]) -> T:
        """Await each call the plan yields and return what it returns; a call's error is thrown into it."""
        reply: Any = None
        error: Optional[Exception] = None
        while True:
            try:
                call = plan.send(reply) if error is None else plan.throw(error)
            except StopIteration as done:
                return done.value
            try:
                reply, error = await self._send(call), None
            except Exception as exc:
                reply, error = None, exc

    async def _send(self, call: Call) -> Any:
        if isinstance(call, Command):
            return await getattr(self.conn, call.name)(*call.args, **call.options)
        if isinstance(call, Pipeline):
            async with self.conn.pipeline(transaction=call.transaction) as pipe:
                for command in call.commands:
                    getattr(pipe, command.name)(*command.args, **command.options)
                return await pipe.execute()
        if isinstance(call, RunScript):
            return await self._scripts[call.script](**call.args)
        await asyncio.sleep(call.seconds)
        return None
