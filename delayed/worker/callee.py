"""Callee: a task function as the worker calls it, read once per function: whether it is a coroutine
function, and whether arguments fit its signature (the bad_arguments check, before the call)."""
import inspect
import sys
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Callee:
    """func, as its tasks call it.

    misfit() is `inspect.signature(func).bind(*args, **kwargs)`: a function whose signature cannot be
    read (some builtins) takes any arguments, and a TypeError of its call is then an ordinary failure.
    fewest, most: how many positional arguments alone fit, which is what bind says for them, known
    without its cost per task (fewest is over most when none do: a keyword-only parameter is required).
    """

    __slots__ = ("func", "coroutine", "fewest", "most", "_bind")

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.coroutine = inspect.iscoroutinefunction(func)
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):  # no signature to read: any arguments are tried
            self._bind: Optional[Callable[..., inspect.BoundArguments]] = None
            self.fewest, self.most = 0, sys.maxsize
        else:
            self._bind = signature.bind
            self.fewest, self.most = _positional(signature)

    def misfit(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Optional[str]:
        """None if func takes these arguments; else why not, as bind says it."""
        if not kwargs and self.fewest <= len(args) <= self.most or self._bind is None:
            return None
        try:
            self._bind(*args, **kwargs)
        except TypeError as exc:
            return f"{getattr(self.func, '__name__', 'the function')}() {exc}"
        return None


def _positional(signature: inspect.Signature) -> Tuple[int, int]:
    """The fewest and the most positional arguments a call without keywords may pass (sys.maxsize: any
    number); the fewest over the most if no such call fits (a keyword-only parameter without a default)."""
    fewest = most = 0
    for parameter in signature.parameters.values():
        if parameter.kind in _POSITIONAL:
            most += 1
            if parameter.default is inspect.Parameter.empty:
                fewest += 1
        elif parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            most = sys.maxsize
        elif parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is inspect.Parameter.empty:
            return sys.maxsize, 0
    return fewest, most
