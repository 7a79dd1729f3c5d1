"""The source of a Go file with one typed constructor per Python task function, from its signature and
type hints: Go code then enqueues our tasks with go-delayed's NewPyTask, its arguments typed by Go."""
import collections.abc
import inspect
import re
import types
import typing
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..errors import ContractError
from ..wire.task import func_path_of

_GO_RESERVED = set("""break case chan const continue default defer else fallthrough for func go goto if import
interface map package range return select struct switch type var any bool byte comparable complex64 complex128
error float32 float64 int int8 int16 int32 int64 rune string uint uint8 uint16 uint32 uint64 uintptr true false
iota nil append cap clear close complex copy delete imag len make max min new panic print println real recover
delayed args item""".split())
"""Go's keywords and predeclared names, and the names the constructors use: a parameter named so gets a `_`."""
_SCALARS: Dict[Any, str] = {int: "int64", float: "float64", str: "string", bytes: "[]byte", bool: "bool",
                            typing.Any: "interface{}"}
_SEQUENCES = (list, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)
_KEYS = {str: "string", int: "int64"}
_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))  # X | None, from Python 3.10


class _Unsupported(Exception):
    """A hint with no Go type that our worker's decoded value would match."""


def go_type(hint: Any) -> str:
    """The Go type of a Python type hint: the Go value NewPyTask writes decodes, in our worker, as hint says."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _UNIONS and len(args) == 2 and type(None) in args:
        inner = go_type(next(arg for arg in args if arg is not type(None)))
        return inner if inner.startswith(("[]", "map[")) or inner == "interface{}" else "*" + inner
    if hint in _SEQUENCES or origin in _SEQUENCES:
        return "[]" + (go_type(args[0]) if args else "interface{}")
    if hint in _MAPPINGS or origin in _MAPPINGS:
        if not args:
            return "map[string]interface{}"
        if args[0] not in _KEYS:
            raise _Unsupported(f"{_shown(hint)}: map keys must be str or int")
        return f"map[{_KEYS[args[0]]}]{go_type(args[1])}"
    raise _Unsupported(f"{_shown(hint)} has no Go type (int, float, str, bytes, bool, Any, Optional, "
                       f"list/Sequence and dict/Mapping of those do)")


def _shown(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def go_name(python: str) -> str:
    """send_email as SendEmail."""
    return "".join(part[:1].upper() + part[1:] for part in python.split("_"))


def task_functions(module: types.ModuleType, names: Optional[Sequence[str]]) -> List[Callable[..., Any]]:
    """The module's public module-level functions (or those named), in the order they are defined."""
    public = {name: value for name, value in vars(module).items() if inspect.isfunction(value)
              and value.__module__ == module.__name__ and not name.startswith("_")}
    if names:
        unknown = [name for name in names if name not in public]
        if unknown:
            raise ContractError(f"not public functions of {module.__name__}: {', '.join(unknown)}")
        return [public[name] for name in names]
    return sorted(public.values(), key=lambda func: func.__code__.co_firstlineno)


def _constructor(func: Callable[..., Any], problems: List[str]) -> str:
    path = func_path_of(func)
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:  # a hint naming what the module does not define, say
        problems.append(f"{path}: its type hints do not resolve ({type(exc).__name__}: {exc})")
        return ""
    params, args, kwargs, variadic = [], [], [], ""
    for param in inspect.signature(func).parameters.values():
        name = param.name + "_" if param.name in _GO_RESERVED else param.name
        if param.kind == param.VAR_KEYWORD:
            problems.append(f"{path}: **{param.name} takes any keywords, which a typed constructor cannot list")
            continue
        if param.name not in hints:
            problems.append(f"{path}: {param.name} has no type hint")
            continue
        try:
            typed = go_type(hints[param.name])
        except _Unsupported as exc:
            problems.append(f"{path}: {param.name}: {exc}")
            continue
        if param.kind == param.VAR_POSITIONAL:
            variadic = f"{name} ...{typed}"
        else:
            params.append(f"{name} {typed}")
            if param.kind == param.KEYWORD_ONLY:
                kwargs.append(f"{_go_string(param.name)}: {name}")
            else:
                args.append(name)
    listed = f"[]interface{{}}{{{', '.join(args)}}}" if args or variadic else "nil"
    keywords = f"map[string]interface{{}}{{{', '.join(kwargs)}}}" if kwargs else "nil"
    constructor, typed_params = go_name(func.__name__), ", ".join(params + ([variadic] if variadic else []))
    head = (f"// {constructor} is the PyTask of {path}{inspect.signature(func)}.\n"
            f"func {constructor}({typed_params}) *delayed.PyTask {{\n")
    if not variadic:
        return head + f"\treturn delayed.NewPyTask({_go_string(path)}, {listed}, {keywords})\n}}\n"
    many = variadic.split(" ", 1)[0]
    return (head + f"\targs := {listed}\n\tfor _, item := range {many} {{\n\t\targs = append(args, item)\n\t}}\n"
            f"\treturn delayed.NewPyTask({_go_string(path)}, args, {keywords})\n}}\n")


def _go_string(text: str) -> str:
    return '"' + re.sub(r'["\\]', lambda found: "\\" + found.group(), text) + '"'


def go_tasks(functions: Sequence[Callable[..., Any]], package: str, command: str) -> str:
    """The Go file; a ContractError lists every hint it cannot type (and nothing is written)."""
    problems: List[str] = []
    bodies = [_constructor(func, problems) for func in functions]
    names = [go_name(func.__name__) for func in functions]
    problems += [f"{name} is made from two functions" for name in sorted(set(names)) if names.count(name) > 1]
    if problems:
        raise ContractError("hints with no Go type, so no Go file written:" + "".join("\n  " + problem
                                                                                  for problem in problems))
    return (f"// Code generated by {command}; DO NOT EDIT.\n\npackage {package}\n\n"
            f'import "github.com/yizhisec/go-delayed/delayed"\n' + "".join("\n" + body for body in bodies))
