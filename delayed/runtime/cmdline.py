"""Passwords out of this process's command line, where `ps` shows them to every user.

/proc/PID/cmdline (what `ps` reads) is the argument strings as they are in the process's own
memory, between the addresses arg_start and arg_end, and a forked child (a supervised worker, a
keep-alive helper) starts with a copy of that memory. As database clients do (mysql), a
password given there (`--redis-url redis://:password@...`) is overwritten with '*'s of the same
length once the arguments are parsed; Python works from its own copy of them (sys.argv), which
is left as it was. Linux only (/proc/self/stat has arg_start and arg_end since Linux 3.5);
elsewhere, or when anything does not look as expected, nothing is done. Until then, `ps` shows
the password: the environment (DELAYED_REDIS_URL) is the place for one.
"""
import ctypes
import os
from typing import Iterable, Optional, Tuple


def hide(secrets: Iterable[str]) -> None:
    """Overwrite every occurrence of each secret in this process's command line with '*'s (Linux; else nothing)."""
    area = _arguments()
    if area is None:
        return
    start, shown = area
    for secret in secrets:
        needle = os.fsencode(secret)  # as the argument's bytes were decoded into sys.argv
        at = shown.find(needle) if needle else -1
        while at != -1:
            ctypes.memset(start + at, ord("*"), len(needle))
            at = shown.find(needle, at + len(needle))


def _arguments() -> Optional[Tuple[int, bytes]]:
    """The address of this process's argument strings and their bytes, or None unless /proc/self/cmdline
    shows exactly the range /proc/self/stat names (fields 48 and 49: arg_start, arg_end)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name: fields 3 on
        start, end = int(fields[48 - 3]), int(fields[49 - 3])
        with open("/proc/self/cmdline", "rb") as cmdline:
            shown = cmdline.read()
    except (OSError, IndexError, ValueError):
        return None
    return (start, shown) if 0 < start < end and len(shown) == end - start else None
