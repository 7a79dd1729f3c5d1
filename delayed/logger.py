"""keakon/delayed 1.x's logging helpers, for code that calls them; delayed logs under the name "delayed"."""
import logging

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
