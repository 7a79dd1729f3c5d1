"""Contracts: the parameter types of go-delayed handlers, read from Go code into a JSON file, so
Python producers can check a GoTask's arguments before Go drops them."""
from .contract import Contract, Handler, Param

__all__ = ["Contract", "Handler", "Param"]
