"""nixl: NIXL's Python API over the nixl C++ library.

The layout is NIXL's: ``nixl._api`` (the high-level agent users call), ``nixl._bindings`` (the
extension module under it), ``nixl._utils`` (test helpers) and ``nixl.logging``; and
``nixl.telemetry`` (the agent telemetry ring and its reader, ``python3 -m nixl.telemetry``).
"""

from nixl import _bindings  # noqa: F401
from nixl import _utils  # noqa: F401
from nixl import logging  # noqa: F401
from nixl._api import (  # noqa: F401
    DEFAULT_COMM_PORT,
    nixl_agent,
    nixl_agent_config,
    nixl_backend_handle,
    nixl_prepped_dlist_handle,
    nixl_thread_sync_t,
    nixl_xfer_handle,
)
from nixl._bindings import (  # noqa: F401
    nixlBackendError,
    nixlCancelledError,
    nixlInvalidParamError,
    nixlMismatchError,
    nixlNoTelemetryError,
    nixlNotAllowedError,
    nixlNotFoundError,
    nixlNotPostedError,
    nixlNotSupportedError,
    nixlRemoteDisconnectError,
    nixlRepostActiveError,
    nixlUnknownError,
    nixlXferStalledError,
)

from nixl._api import __all__  # noqa: E402,F401  (one list of public names)
