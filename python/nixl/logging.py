"""Logging of the nixl package (``nixl.logging.get_logger``).

Everything nixl logs goes through the ``nixl`` logger hierarchy (``nixl._api``, ...):

- ``NIXL_LOG_LEVEL`` (TRACE, DEBUG, INFO, WARN/WARNING, ERROR, FATAL; default WARN, as for the
  C++ library) is the level of the ``nixl`` logger.
- Records propagate to the root logger, so a program that configures logging
  (``logging.basicConfig``, its own handlers) receives nixl's records with its own formatting.
- A program that configures nothing still sees them: a fallback handler on ``nixl`` prints to
  stderr while the root logger has no handler (and stays silent once it has one, so nothing is
  printed twice).
- ``get_logger(name)`` returns ``logging.getLogger(name)``. A name outside ``nixl`` is the
  caller's logger: its level and propagation are left alone unless ``NIXL_LOG_LEVEL`` is set,
  in which case that level is applied to it as well.
- ``NIXL_DEBUG_LOGGING`` set to a true value makes errors inside logging calls raise
  (``logging.raiseExceptions``).
"""

import logging as _logging
import os as _os
import sys as _sys

_LEVELS = {
    "TRACE": _logging.DEBUG,
    "DEBUG": _logging.DEBUG,
    "INFO": _logging.INFO,
    "WARN": _logging.WARNING,
    "WARNING": _logging.WARNING,
    "ERROR": _logging.ERROR,
    "FATAL": _logging.CRITICAL,
    "CRITICAL": _logging.CRITICAL,
}
_TRUE = ("1", "y", "yes", "on", "true", "enable")

ROOT = "nixl"


def _env_level():
    """The level NIXL_LOG_LEVEL names, or None when it is unset or unknown."""
    raw = _os.environ.get("NIXL_LOG_LEVEL")
    if raw is None:
        return None
    level = _LEVELS.get(raw.strip().upper())
    if level is None:
        _sys.stderr.write(
            f"nixl: NIXL_LOG_LEVEL={raw!r} is not one of {', '.join(_LEVELS)}; using WARN\n"
        )
    return level


_ENV_LEVEL = _env_level()  # read once, when nixl is imported


class _FallbackHandler(_logging.StreamHandler):
    """Prints to stderr only while the program has configured no root handler."""

    def __init__(self):
        super().__init__(_sys.stderr)
        self.setFormatter(_logging.Formatter("[nixl %(levelname).1s] %(name)s: %(message)s"))

    def emit(self, record):
        if _logging.getLogger().handlers:
            return
        # Follow sys.stderr if it was replaced (pytest's capsys, redirect_stderr).
        self.stream = _sys.stderr
        super().emit(record)


def _configure():
    log = _logging.getLogger(ROOT)
    if getattr(log, "_nixl_configured", False):
        return
    log.setLevel(_ENV_LEVEL if _ENV_LEVEL is not None else _logging.WARNING)
    if not any(isinstance(h, _FallbackHandler) for h in log.handlers):
        log.addHandler(_FallbackHandler())
    log._nixl_configured = True
    if _os.environ.get("NIXL_DEBUG_LOGGING", "").strip().lower() in _TRUE:
        _logging.raiseExceptions = True


def get_logger(name: str) -> _logging.Logger:
    """The logger called ``name``, with nixl's configuration applied (see the module doc)."""
    _configure()
    log = _logging.getLogger(name)
    if _ENV_LEVEL is not None and name != ROOT and not name.startswith(ROOT + "."):
        log.setLevel(_ENV_LEVEL)
    return log


_configure()
