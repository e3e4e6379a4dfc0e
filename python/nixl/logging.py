"""Logging of the nixl package (``nixl.logging.get_logger``), configured as NIXL's is.

- The ``nixl`` logger has its own handler: one ``StreamHandler`` on stdout at INFO with the
  format ``%(asctime)s NIXL %(levelname)-7s %(filename)s:%(lineno)d %(message)s`` (date format
  ``%Y-%m-%d %H:%M:%S``). It is at level INFO and does not propagate to the root logger.
- ``NIXL_LOG_LEVEL`` (TRACE and DEBUG -> DEBUG, INFO, WARN, ERROR, FATAL -> CRITICAL) sets the
  ``nixl`` logger's level; an unknown value logs a warning and keeps INFO.
- ``get_logger(name)`` is ``logging.getLogger("nixl." + name.lstrip("_"))``: in a script,
  ``get_logger(__name__)`` is ``nixl.main__``, so a program's ``logger.info(...)`` lines are
  printed on stdout.
- The C++ library logs to stderr, as NIXL's does (absl-like lines, one write each), not
  through this logger: only the Python side's messages are printed on stdout.
- ``NIXL_DEBUG_LOGGING`` true (``true``, ``1``, ``yes``) sets ``logging.raiseExceptions``.
"""

import logging as _logging
import logging.config as _logging_config
import os as _os

_LEVELS = {
    "TRACE": "DEBUG",
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "WARN": "WARNING",
    "WARNING": "WARNING",
    "ERROR": "ERROR",
    "FATAL": "CRITICAL",
    "CRITICAL": "CRITICAL",
}

ROOT = "nixl"
FORMAT = "%(asctime)s NIXL %(levelname)-7s %(filename)s:%(lineno)d %(message)s"
DATEFMT = "%Y-%m-%d %H:%M:%S"

_configured = False


def _configure():
    global _configured
    if _configured:
        return
    _configured = True
    _logging_config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"nixl": {"format": FORMAT, "datefmt": DATEFMT}},
            "handlers": {
                "nixl_stdout": {
                    "class": "logging.StreamHandler",
                    "level": "INFO",
                    "formatter": "nixl",
                    "stream": "ext://sys.stdout",
                }
            },
            "loggers": {
                ROOT: {"level": "INFO", "handlers": ["nixl_stdout"], "propagate": False},
            },
        }
    )
    log = _logging.getLogger(ROOT)
    raw = _os.environ.get("NIXL_LOG_LEVEL")
    if raw:
        level = _LEVELS.get(raw.strip().upper())
        if level is None:
            log.warning("Invalid NIXL_LOG_LEVEL %r, keeping INFO (one of %s)", raw, ", ".join(_LEVELS))
        else:
            log.setLevel(level)
    if _os.environ.get("NIXL_DEBUG_LOGGING", "").strip().lower() in ("true", "1", "yes"):
        _logging.raiseExceptions = True


def get_logger(name: str) -> _logging.Logger:
    """The logger ``"nixl." + name.lstrip("_")``, with nixl's configuration in place."""
    _configure()
    return _logging.getLogger(ROOT + "." + name.lstrip("_"))


_configure()
