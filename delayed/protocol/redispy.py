"""The redis-py internals delayed relies on where redis-py has no public API, all in this module.

tests/test_redispy.py checks each against the installed redis-py: a release that changes one fails
there, by name, and here at run time with a TypeError naming it, rather than resending a command.
"""
import copy
from typing import Any, Callable, Dict, List

import redis
import redis.cluster


def _internal(obj: Any, name: str) -> Any:
    """obj's attribute name, or a TypeError naming it and the redis-py version when it is gone."""
    try:
        return getattr(obj, name)
    except AttributeError:
        raise TypeError(f"redis-py {redis.__version__}: {type(obj).__name__}.{name} is gone; delayed relies "
                        "on it to send each command once (see delayed/protocol/redispy.py)") from None


_UNOWNED: Dict[type, type] = {}


def unowned_copy(client: redis.cluster.RedisCluster) -> redis.cluster.RedisCluster:
    """A shallow copy of client on its nodes and pools whose collection closes nothing: redis-py has
    no public way to build a RedisCluster on another's nodes, and RedisCluster.__del__ closes them."""
    cls = type(client)
    if cls not in _UNOWNED:  # a subclass of the client's own class, so its overrides stay
        _UNOWNED[cls] = type(cls.__name__, (cls,), {"__del__": lambda self: None,
                                                    "__doc__": "A copy that owns nothing (delayed.protocol.redispy)."})
    view = copy.copy(client)
    view.__class__ = _UNOWNED[cls]
    return view


def pipeline_commands(pipe: redis.cluster.ClusterPipeline) -> List[Any]:
    """The commands queued on a ClusterPipeline, each with .args and, once sent, .result: redis-py keeps
    them in its execution strategy (_execution_strategy.command_queue) and shows them nowhere else."""
    return list(_internal(_internal(pipe, "_execution_strategy"), "command_queue"))


def wrap_resend(pipe: redis.cluster.ClusterPipeline, wrapper: Callable[..., Any]) -> None:
    """Send the commands a non-transactional ClusterPipeline sends again one by one (after a redirect or
    a lost connection) through wrapper(resend, *args, **options): redis-py resends every failed command
    through its parent_execute_command, and no option turns that off."""
    resend = _internal(pipe, "parent_execute_command")
    pipe.parent_execute_command = lambda *args, **options: wrapper(resend, *args, **options)
