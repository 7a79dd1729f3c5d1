"""Contracts between Python producers and Go handlers: check a GoTask against a Go package's handler
types (Contract), and write typed code for either side (`delayed contract python|gotasks`)."""
from .contract import Contract, Handler, Param

__all__ = ["Contract", "Handler", "Param"]
