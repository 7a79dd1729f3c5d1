"""The allowlist: the only functions a worker will call, resolved once at start; and the checks before
a call (middleware): the function is allowed, and its signature takes the task's arguments."""
import importlib
import inspect
import pkgutil
from types import ModuleType
from typing import Any, Callable, Dict, Iterable, List, Union

from ..errors import FunctionNotAllowedError, message_of
from ..wire.dead_letter import Reason
from ..wire.preview import brief
from ..wire.task import FUNC_PATH_SEP, func_path_of
from .callee import Callee
from .middleware import Middleware
from .run import Run

Allowed = Union[str, ModuleType, Callable[..., Any]]


def public_functions(module: ModuleType) -> Dict[str, Callable[..., Any]]:
    """The functions defined in module itself whose names do not start with '_', by func path.

    Functions a module merely imports (`from os import system`), classes,
    submodules and attributes of attributes are left out on purpose.
    """
    return {
        module.__name__ + FUNC_PATH_SEP + name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == module.__name__
    }


def submodule_names(module: ModuleType) -> List[str]:
    """The modules inside a package (none for a plain module): where its task functions may be."""
    return [module.__name__ + "." + info.name for info in pkgutil.iter_modules(getattr(module, "__path__", []))]


class Allowlist:
    """Func path -> function, for the modules and functions the operator allowed.

    A task naming anything else is refused: lookups are an exact dict match,
    so no import, getattr or dotted path is ever evaluated for a task.
    """

    def __init__(self, allowed: Iterable[Allowed]) -> None:
        self._functions: Dict[str, Callable[..., Any]] = {}
        for item in allowed:
            if isinstance(item, str):
                item = importlib.import_module(item)
            if isinstance(item, ModuleType):
                self._functions.update(public_functions(item))
            elif callable(item):
                self._functions[func_path_of(item)] = item
            else:
                raise TypeError(f"allow takes module names, modules or functions, not {item!r}")

    def resolve(self, func_path: str) -> Callable[..., Any]:
        try:
            return self._functions[func_path]
        except KeyError:
            raise FunctionNotAllowedError(f"{brief(func_path)} is not an allowed task function") from None

    def __contains__(self, func_path: object) -> bool:
        return func_path in self._functions

    def __len__(self) -> int:
        return len(self._functions)

    def paths(self) -> List[str]:
        return sorted(self._functions)


class CallCheck(Middleware):
    """The checks before a call: the task's function is in the allowlist (run.callee, read once per
    function), else the task is refused as not_allowed; and its signature takes the task's arguments,
    else it is refused as bad_arguments, never called (a TypeError the function raises itself is an
    ordinary failure)."""

    def __init__(self, allowlist: Allowlist) -> None:
        self.allowlist = allowlist
        self._callees: Dict[str, Callee] = {}  # func path -> its Callee: only allowed paths, so bounded

    def before(self, run: Run) -> None:
        task = run.task
        assert task is not None
        callee = self._callees.get(task.func_path)
        if callee is None:
            try:
                func = self.allowlist.resolve(task.func_path)
            except FunctionNotAllowedError as exc:
                run.refuse(Reason.NOT_ALLOWED, str(exc), task.func_path)
                return
            callee = self._callees[task.func_path] = Callee(func)
        run.callee = callee
        if not task.kwargs and callee.fewest <= len(task.args) <= callee.most:  # most tasks: no call to bind
            return
        misfit = callee.misfit(task.args, task.kwargs)
        if misfit is not None:
            run.refuse(Reason.BAD_ARGUMENTS, message_of(TypeError(misfit)), task.func_path)
