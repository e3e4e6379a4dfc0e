"""Loggers of the nixl package (``nixl.logging.get_logger``).

``NIXL_LOG_LEVEL`` (ERROR, WARN/WARNING, INFO, DEBUG, TRACE) sets the level, as for the C++
library; ``NIXL_DEBUG_LOGGING`` set to a true value makes logging errors raise
(``logging.raiseExceptions``).
"""

import logging as _logging
import os as _os

_LEVELS = {
    "ERROR": _logging.ERROR,
    "WARN": _logging.WARNING,
    "WARNING": _logging.WARNING,
    "INFO": _logging.INFO,
    "DEBUG": _logging.DEBUG,
    "TRACE": _logging.DEBUG,
}


def _level():
    return _LEVELS.get(_os.environ.get("NIXL_LOG_LEVEL", "WARN").upper(), _logging.WARNING)


if _os.environ.get("NIXL_DEBUG_LOGGING", "").lower() in ("1", "y", "yes", "on", "true"):
    _logging.raiseExceptions = True


def get_logger(name: str) -> _logging.Logger:
    """Returns the logger ``name`` with nixl's level and a stderr handler."""
    logger = _logging.getLogger(name)
    if not getattr(logger, "_nixl_configured", False):
        logger.setLevel(_level())
        if not logger.handlers:
            h = _logging.StreamHandler()
            h.setFormatter(_logging.Formatter("[nixl %(levelname).1s] %(name)s: %(message)s"))
            logger.addHandler(h)
        logger.propagate = False
        logger._nixl_configured = True
    return logger
