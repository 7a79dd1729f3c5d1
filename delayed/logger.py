"""How delayed logs: keakon/delayed 1.x's logging helpers, for code that calls them (delayed logs under
the name "delayed"), and how every command logs on stderr, as text or as JSON (--log-format)."""
import datetime
import json
import logging
import sys
import threading
from types import TracebackType
from typing import Any, Dict, Optional, Type

DEFAULT_DATE_FORMAT = "%y%m%d %H:%M:%S"
DEFAULT_LOG_FORMAT = "[%(levelname)1.1s %(asctime)s %(process)d %(module)s:%(lineno)d] %(message)s"

logger = logging.getLogger("delayed")


def set_handler(handler: logging.Handler) -> None:
    """Make handler the only handler of delayed's logs."""
    logger.handlers = [handler]


def setup_logger(
    date_format: str = DEFAULT_DATE_FORMAT,
    log_format: str = DEFAULT_LOG_FORMAT,
    log_level: int = logging.DEBUG,
) -> None:
    """Print delayed's logs on stderr: keakon/delayed 1.x's helper.

    delayed logs under the logger `"delayed"`; this makes a stderr handler its only handler, and sets
    its level. Your own logging configuration works as well.

    Args:
        date_format: The handler's date format (default `%y%m%d %H:%M:%S`).
        log_format: The handler's format (default
            `[%(levelname)1.1s %(asctime)s %(process)d %(module)s:%(lineno)d] %(message)s`).
        log_level: The least level printed (default `logging.DEBUG`).
    """
    handler = logging.StreamHandler()
    handler.setLevel(log_level)
    handler.setFormatter(logging.Formatter(fmt=log_format, datefmt=date_format))
    set_handler(handler)
    logger.setLevel(log_level)


LOG_FORMATS = ("text", "json")
"""What --log-format takes: text lines (the default) or one JSON object per line."""
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"
"""The text format of every command's log lines."""
_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
"""The attributes every LogRecord has: the rest of a record's attributes are the extra fields its line
was logged with (logger.info(..., extra={"task": task_id}))."""


class JSONFormatter(logging.Formatter):
    """A record as one line of JSON: time (ISO 8601, UTC, milliseconds), level, logger, message and
    process, then the extra fields it was logged with (the worker's lines name the task's id as "task",
    its "queue" and its "func", as our Go worker's slog attributes do), and "exception" with its
    traceback if it has one. A value JSON cannot hold is written as its str()."""

    def format(self, record: logging.LogRecord) -> str:
        entry: Dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).isoformat(
                timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name, value in vars(record).items():
            if name not in _RECORD_FIELDS:
                entry.setdefault(name, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


_json_handler: Optional[logging.Handler] = None
"""The stderr handler log_to_stderr installed for JSON logs, through which say() writes too."""


def log_to_stderr(level: str, log_format: str = "text") -> None:
    """How a command logs: every logger's lines of level and above on stderr, as text (TEXT_FORMAT) or
    as JSON (JSONFormatter, one object per line). With JSON, Python's warnings go through logging too
    (logger py.warnings), and so does an exception that ends the process or a thread, so that every
    line the command writes on stderr is one JSON object."""
    global _json_handler
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    if log_format == "text":
        logging.basicConfig(level=level, format=TEXT_FORMAT)
        return
    _json_handler = logging.StreamHandler()
    _json_handler.setFormatter(JSONFormatter())
    logging.basicConfig(level=level, handlers=[_json_handler])
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(kind: Type[BaseException], exc: BaseException, trace: Optional[TracebackType]) -> None:
    logging.getLogger("delayed").critical("uncaught %s: %s", kind.__name__, exc, exc_info=(kind, exc, trace))


def _log_uncaught_in_thread(hook: "threading.ExceptHookArgs") -> None:
    if hook.exc_type is SystemExit:
        return
    exc = hook.exc_value if hook.exc_value is not None else hook.exc_type()
    logging.getLogger("delayed").critical("uncaught %s in thread %s: %s", hook.exc_type.__name__,
                                          hook.thread.name if hook.thread else "?", exc,
                                          exc_info=(hook.exc_type, exc, hook.exc_traceback))


def say(text: str, name: str, level: int, message: str) -> None:
    """One line a command writes on stderr itself (its one-line error, a warning, a note): text as it is,
    or with JSON logs (log_to_stderr) a record of logger name, level and message as a JSON object,
    whatever the log level, as the text line would be."""
    if _json_handler is None:
        print(text, file=sys.stderr, flush=True)
        return
    record = logging.getLogger(name).makeRecord(name, level, "(command)", 0, message, (), None)
    _json_handler.handle(record)
