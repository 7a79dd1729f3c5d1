"""The source of a typed Python module for a contract: one function per handler returning its GoTask,
checked by the contract it embeds, and a TypedDict per Go struct, so mypy checks calls before they run."""
import builtins
import keyword
import pprint
import re
from typing import Any, Dict, List, Set

from ..errors import ContractError
from .contract import Contract, Handler
from .types import GoType

_TAKEN = {"datetime", "Any", "Mapping", "Optional", "Sequence", "TypedDict", "Union", "Float32", "GoTask",
          "Contract"}
"""Names the module itself imports: a handler or struct named so gets a trailing underscore, as one
named as a Python builtin does (a function `bool` would shadow the type in every later hint)."""


def snake(name: str) -> str:
    """Go's CamelCase as Python's snake_case: NoArg is no_arg, HTTPGet is http_get."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _free(name: str) -> str:
    name = re.sub(r"\W", "_", name)
    taken = keyword.iskeyword(name) or name in _TAKEN or hasattr(builtins, name) or not name.isidentifier()
    return name + "_" if taken else name


def _names(full_names: List[str], style: Any) -> Dict[str, str]:
    """A Python name for each Go name (pkg.Name): style(Name), or style(pkgName) where two would clash."""
    short = {full: style(full.rsplit(".", 1)[-1]) for full in full_names}
    clashing = {name for name in short.values() if list(short.values()).count(name) > 1}
    names = {full: _free(style(full.rsplit("/", 1)[-1].replace(".", "_")) if short[full] in clashing
                         else short[full]) for full in full_names}
    if len(set(names.values())) < len(names):
        raise ContractError(f"two Go names make the same Python name: {sorted(names)}")
    return names


class _Writer:
    """Python type hints for Go types, gathering the structs met and the typing names used."""

    def __init__(self) -> None:
        self.structs: Dict[str, GoType] = {}  # by Go name, inner ones first
        self.typing: Set[str] = set()
        self.struct_names: Dict[str, str] = {}

    def collect(self, want: GoType) -> None:
        for inner in (want.elem, want.key, *(field.type for field in want.fields)):
            if inner is not None:
                self.collect(inner)
        if want.kind == "struct":
            self.structs.setdefault(want.name or want.go, want)

    def hint(self, want: GoType) -> str:
        kind = want.kind
        if kind == "float" and want.bits == 32:
            return self.use("Union") + "[float, Float32]"
        simple = {"int": "int", "float": "float", "string": "str", "bool": "bool", "time": "datetime.datetime"}
        if kind in simple:
            return simple[kind]
        if kind == "bytes":
            return self.use("Optional") + "[bytes]"
        if kind == "any":
            return self.use("Any")
        if kind == "struct":
            return self.struct_names[want.name or want.go]
        assert want.elem is not None
        elem = self.hint(want.elem)
        if kind == "pointer":
            return elem if elem.startswith("Optional[") or elem == "Any" else f"{self.use('Optional')}[{elem}]"
        if kind == "array":
            return f"{self.use('Sequence')}[{elem}]"
        if kind == "slice":
            return f"{self.use('Optional')}[{self.use('Sequence')}[{elem}]]"
        assert want.key is not None
        return f"{self.use('Optional')}[{self.use('Mapping')}[{self.hint(want.key)}, {elem}]]"

    def use(self, name: str) -> str:
        self.typing.add(name)
        return name


def _function(name: str, handler: Handler, writer: _Writer) -> str:
    params, passed = [], []
    for index, param in enumerate(handler.params):
        python = _free(param.name) if param.name not in ("", "_") else f"arg{index}"
        variadic = handler.variadic and index == len(handler.params) - 1
        if variadic:
            assert param.type.elem is not None
            params.append(f"*{python}: {writer.hint(param.type.elem)}")
        else:
            params.append(f"{python}: {writer.hint(param.type)}")
        passed.append(("*" if variadic else "") + python)
    arguments = "".join(", " + argument for argument in passed)
    return (f"\n\ndef {name}({', '.join(params)}) -> GoTask:\n"
            f'    """{handler.name}: {handler.signature}"""\n'
            f"    return _CONTRACT.task({handler.name!r}{arguments})\n")


def python_module(data: Dict[str, Any], source: str) -> str:
    """The module for the contract data (a contract JSON's value); source names where it came from."""
    contract = Contract.from_dict(data)
    writer = _Writer()
    for handler in contract.handlers.values():
        for param in handler.params:
            writer.collect(param.type)
    writer.struct_names = _names(list(writer.structs), lambda name: name)
    structs = "".join(
        f"{writer.struct_names[go]} = {writer.use('TypedDict')}({writer.struct_names[go]!r}, "
        f"{{{', '.join(f'{field.name!r}: {writer.hint(field.type)}' for field in want.fields)}}})\n"
        for go, want in writer.structs.items())
    functions = "".join(_function(name, contract.handlers[go], writer)
                        for go, name in _names(list(contract.handlers), snake).items())
    refused = "".join(f"\n  {name}: {why}" for name, why in contract.refused.items())
    embedded = pprint.pformat(data, width=110, sort_dicts=False)
    imports = "import datetime\n" if "datetime.datetime" in functions + structs else ""
    if writer.typing:
        imports += f"from typing import {', '.join(sorted(writer.typing))}\n"
    float32 = "Float32, " if "Float32" in functions + structs else ""
    return (f'"""GoTasks for the go-delayed handlers of {contract.package or "a Go package"},\neach checked by '
            f"its contract before it is enqueued.\n\nWritten by `python -m delayed contract python {source}`: "
            f"regenerate it rather than edit it."
            + (f"\nNot here, as go-delayed cannot run them:{refused}" if refused else "") + '\n"""\n'
            f"{imports}\nfrom delayed import {float32}GoTask\nfrom delayed.contract import Contract\n\n"
            f"{structs}\n_CONTRACT = Contract.from_dict({embedded})\n{functions}")
