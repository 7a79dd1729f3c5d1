"""A Go package's contract: its go-delayed handlers' parameter types, read from the JSON that
`delayed contract go` writes, so a GoTask is checked against them before it is enqueued."""
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from ..errors import ContractError
from ..wire.task import GoTask
from .convert import convert
from .types import GoType, parse_type

VERSION = 1


@dataclass(frozen=True)
class Param:
    name: str
    type: GoType


@dataclass(frozen=True)
class Handler:
    """One go-delayed handler: its full Go name, its Go signature and its parameters (the last one a
    slice if variadic)."""

    name: str
    signature: str
    variadic: bool
    params: Tuple[Param, ...]

    def payload(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """GoTask's args for this call: each argument converted, laid out as go-delayed's NewGoTask lays them."""
        given = self._bind(args, kwargs)
        values = [convert(value, param.type, param.name or f"argument {index}", self.name)
                  for index, (param, value) in enumerate(zip(self.params, given))]
        if not values:
            return None
        return values[0] if len(values) == 1 else values

    def _bind(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Any]:
        """One value per parameter, from positional and keyword arguments; a variadic's tail as one list."""
        fixed = len(self.params) - 1 if self.variadic else len(self.params)
        values: Dict[int, Any] = dict(enumerate(args[:fixed]))
        if len(args) > fixed:
            if not self.variadic:
                raise ContractError(f"{self.name}: takes {fixed} argument{'s' * (fixed != 1)}, got {len(args)} "
                                    f"({self.signature})")
            values[fixed] = list(args[fixed:])
        names = {param.name: index for index, param in enumerate(self.params) if param.name not in ("", "_")}
        for name, value in kwargs.items():
            if name not in names:
                raise ContractError(f"{self.name}: no parameter named {name!r} ({self.signature})")
            if names[name] in values:
                raise ContractError(f"{self.name}: {name} is given twice ({self.signature})")
            values[names[name]] = value
        if self.variadic:
            values.setdefault(fixed, [])
        missing = [param.name or f"argument {index}" for index, param in enumerate(self.params) if index not in values]
        if missing:
            raise ContractError(f"{self.name}: missing {', '.join(missing)} ({self.signature})")
        return [values[index] for index in range(len(self.params))]


class Contract:
    """The go-delayed handlers of a Go package and their parameter types: check a GoTask before you enqueue it.

    `delayed contract go DIR -o FILE` reads the handlers from the Go code into a JSON file; `load` reads
    that file. `task()` then makes the GoTask you would have written by hand, byte for byte, with each
    argument checked against its Go parameter and converted to what go-delayed decodes (a `Float32`
    for a `float32`, a struct as the list of its fields). A mistake raises `ContractError` before
    anything is enqueued, instead of a task Go drops. The manual's page "Contracts with Go" follows
    one from Go handlers to checked GoTasks.

    Args:
        package: The Go package's import path.
        handlers: The handlers, by the name go-delayed knows them by (`main.Add`).
        refused: Functions that cannot be handlers, with why (a parameter go-delayed cannot decode).
    """

    def __init__(self, package: str, handlers: Dict[str, Handler], refused: Dict[str, str]) -> None:
        self.package = package
        self.handlers = handlers
        self.refused = refused

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Contract":
        """Read a contract from the JSON file `delayed contract go` writes.

        Args:
            path: The file.

        Returns:
            The contract.

        Raises:
            ContractError: The file cannot be read, or is not a contract.
        """
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ContractError(f"cannot read the contract {path}: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> "Contract":
        """A contract from its JSON's value.

        Args:
            data: The parsed JSON.

        Returns:
            The contract.

        Raises:
            ContractError: `data` is not a contract of version 1; the message says what is wrong.
        """
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ContractError(f"not a contract of version {VERSION}: {str(data)[:100]}")
        handlers, refused = data.get("handlers"), data.get("refused", {})
        if not isinstance(handlers, dict) or not isinstance(refused, dict):
            raise ContractError("a contract's handlers and refused must be objects")
        return cls(str(data.get("package", "")), {name: _handler(name, spec) for name, spec in handlers.items()},
                   {str(name): str(why) for name, why in refused.items()})

    def handler(self, go_name: str) -> Handler:
        """The handler named `go_name`.

        Args:
            go_name: The handler's name, as go-delayed knows it (`main.Add`).

        Returns:
            The handler.

        Raises:
            ContractError: The contract has no such handler: says why if it was refused, or the nearest
                name.
        """
        found = self.handlers.get(go_name)
        if found is not None:
            return found
        if go_name in self.refused:
            raise ContractError(f"{go_name} cannot be a GoTask: it {self.refused[go_name]}")
        near = difflib.get_close_matches(go_name, self.handlers, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise ContractError(f"{go_name} is not a handler in the contract of {self.package or 'its package'}{hint}")

    def task(self, go_name: str, *args: Any, **kwargs: Any) -> GoTask:
        """A GoTask calling `go_name` with these arguments, each checked and converted for its Go parameter.

        Args:
            go_name: The handler's name, as go-delayed knows it (`main.Add`).
            *args: The arguments, in order; a variadic handler's last ones as given.
            **kwargs: Arguments by their Go parameter's name.

        Returns:
            The task, byte for byte what you would have written by hand.

        Raises:
            ContractError: No such handler, an argument missing, extra or given twice, or one that does
                not fit its Go type (naming the parameter's path and the Go type expected).
        """
        return GoTask(go_name, self.handler(go_name).payload(args, kwargs))


def _handler(name: str, spec: Any) -> Handler:
    where = f"handler {name}"
    if not isinstance(spec, dict) or not isinstance(spec.get("params"), list):
        raise ContractError(f"{where}: expected an object with a list of params")
    params = []
    for index, param in enumerate(spec["params"]):
        if not isinstance(param, dict):
            raise ContractError(f"{where}: param {index} must be an object")
        param_name = str(param.get("name") or "")
        params.append(Param(param_name, parse_type(param.get("type"), f"{where}, param {param_name or index}")))
    variadic = spec.get("variadic") is True
    if variadic and (not params or params[-1].type.kind != "slice"):
        raise ContractError(f"{where}: variadic, but its last param is not a slice")
    return Handler(name, str(spec.get("signature", "")), variadic, tuple(params))
