# Above 600 lines: NIXL's nixl_agent API, method by method, kept in the one module NIXL's
# users import (nixl._api).
"""NIXL's high-level Python API (``nixl._api``) over the nixl C++ library.

Names, signatures, defaults, return values, error types and the order of side effects follow
NIXL's ``nixl._api``; docs/python.md has the method-by-method comparison. Deliberate
differences: ``get_serialized_descs`` / ``deserialize_descs`` use the library's versioned binary
codec instead of pickle (malformed bytes raise ``nixlMismatchError``), and the metadata listener
binds to loopback unless told otherwise.

Torch is never imported: tensors are recognised by their methods (``data_ptr``, ``numel``,
``element_size``, ``is_contiguous``) and their ``device``.
"""

from __future__ import annotations

import datetime
import functools
import threading
import time
import weakref
from enum import Enum
from typing import Any, Optional, Union

import numpy as np

from nixl import _bindings as nixlBind
from nixl import telemetry as _telemetry
from nixl._wait import fd_events as _fd_events
from nixl.logging import get_logger

logger = get_logger("_api")  # "nixl.api", as in NIXL

DEFAULT_COMM_PORT = nixlBind.DEFAULT_COMM_PORT
nixl_backend_handle = int

_DONE = "DONE"
_PROC = "PROC"
_ERR = "ERR"


def _take_match(store: dict, remote_agent_name, lookup_tag, tag_is_prefix: bool) -> bool:
    """Removes and reports the first message of ``remote_agent_name`` in ``store`` that starts
    with (``tag_is_prefix``) or contains ``lookup_tag``."""
    name = _as_str(remote_agent_name)
    tag = lookup_tag.encode() if isinstance(lookup_tag, str) else bytes(lookup_tag)
    msgs = store.get(name)
    if not msgs:
        return False
    for i, msg in enumerate(msgs):
        if msg.startswith(tag) if tag_is_prefix else tag in msg:
            del msgs[i]
            return True
    return False


def _merge(store: dict, new: dict) -> None:
    for name, msgs in new.items():
        store.setdefault(name, []).extend(msgs)


class nixl_thread_sync_t(Enum):
    """How an agent guards itself against concurrent calls (the binding's values)."""

    NIXL_THREAD_SYNC_NONE = nixlBind.NIXL_THREAD_SYNC_NONE
    NIXL_THREAD_SYNC_STRICT = nixlBind.NIXL_THREAD_SYNC_STRICT
    NIXL_THREAD_SYNC_RW = nixlBind.NIXL_THREAD_SYNC_RW
    # Same value as NONE, so an alias of it (as in NIXL).
    NIXL_THREAD_SYNC_DEFAULT = nixlBind.NIXL_THREAD_SYNC_DEFAULT


class nixl_agent_config:
    """What an agent starts with. Note: the progress thread is on by default, as in NIXL's
    Python API (the C++ default is off). ``sync_mode=None`` means STRICT with a listener and
    NONE without."""

    def __init__(
        self,
        enable_prog_thread: bool = True,
        enable_listen_thread: bool = False,
        listen_port: int = DEFAULT_COMM_PORT,
        capture_telemetry: bool = False,
        num_threads: int = 0,
        backends: list[str] = ["UCX"],  # noqa: B006 (NIXL's signature)
        sync_mode: Optional[nixl_thread_sync_t] = None,
        listen_address: Optional[str] = None,
        metadata_secret: Optional[str] = None,
        xfer_stall_timeout: Optional[datetime.timedelta] = None,
    ):
        # Not in NIXL. listen_address: the address the metadata listener binds; None means
        # NIXL_LISTEN_ADDRESS if set, else 127.0.0.1 ("0.0.0.0" / "::" bind every address).
        # metadata_secret: shared secret authenticating listener traffic; None means
        # NIXL_METADATA_SECRET if set, else none. xfer_stall_timeout: the binding's
        # nixlAgentConfig.xferStallTimeout (a request in progress that long after its post is
        # canceled and check_xfer_state raises nixlXferStalledError); None: off.
        if sync_mode is not None and not isinstance(sync_mode, nixl_thread_sync_t):
            raise TypeError(
                "nixl_agent_config: sync_mode must be a nixl_thread_sync_t member or None, not "
                f"{type(sync_mode).__name__}"
            )
        self.enable_pthread = enable_prog_thread
        self.enable_listen = enable_listen_thread
        self.port = listen_port
        self.capture_telemetry = capture_telemetry
        self.num_threads = num_threads
        self.backends = list(backends)
        self.sync_mode = sync_mode
        self.listen_address = listen_address
        self.metadata_secret = metadata_secret
        self.xfer_stall_timeout = xfer_stall_timeout


# Backend parameter that receives nixl_agent_config.num_threads, per backend (NIXL's mapping).
_THREADS_PARAM = {
    "UCX": "num_threads",
    "OBJ": "num_threads",
    "LIBFABRIC": "num_threads",
    "GDS_MT": "thread_count",
    "UCCL": "num_cpus",
}


def _binding_config(conf: nixl_agent_config) -> "nixlBind.nixlAgentConfig":
    """The binding's nixlAgentConfig for a Python config, one field per line."""
    sync = conf.sync_mode
    if sync is None:
        sync = (
            nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT
            if conf.enable_listen
            else nixl_thread_sync_t.NIXL_THREAD_SYNC_NONE
        )
    c = nixlBind.nixlAgentConfig()
    c.useProgThread = conf.enable_pthread
    c.useListenThread = conf.enable_listen
    c.listenPort = conf.port
    c.syncMode = sync.value
    c.pthrDelay = 0
    c.lthrDelay = 100000
    c.captureTelemetry = conf.capture_telemetry
    c.listenAddress = getattr(conf, "listen_address", None) or ""
    c.metadataSecret = getattr(conf, "metadata_secret", None) or ""
    stall = getattr(conf, "xfer_stall_timeout", None)
    if stall is not None:
        c.xferStallTimeout = stall
    return c


class _handle(int):
    """An integer handle owned by one binding agent, released once (explicitly or when
    dropped). Constructed as in NIXL: ``cls(agent, value)``; ``_handle`` is the raw value."""

    def __new__(cls, agent, value: int):
        obj = super().__new__(cls, int(value))
        obj._agent = agent
        obj._released = False
        return obj

    @property
    def _handle(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(0x{int(self):x}, released={self._released})"

    def release(self) -> None:
        if not self._released:
            self._release_raw()
            self._released = True

    def __del__(self):
        if getattr(self, "_released", True):
            return
        try:
            self.release()
        except Exception:
            try:
                # The binding keeps what it could not release and frees it with the agent.
                logger.error("%r: release on drop failed; freed with its agent", self)
            except Exception:
                pass


class nixl_prepped_dlist_handle(_handle):
    """A descriptor list prepared by ``prep_xfer_dlist``."""

    def _release_raw(self) -> None:
        self._agent.releasedDlistH(int(self))


class nixl_xfer_handle(_handle):
    """A transfer request from ``initialize_xfer`` or ``make_prepped_xfer``. Releasing one in
    flight cancels it."""

    def __new__(cls, agent, value: int, operation: str = "WRITE"):
        obj = super().__new__(cls, agent, value)
        obj._op = operation
        obj._posted = False
        return obj

    def _release_raw(self) -> None:
        self._agent.releaseXferReq(int(self))


# Telemetry: the event a binding exception counts as, and the methods whose errors are counted.
_ERROR_EVENTS = {
    getattr(nixlBind, cls): _telemetry.EVENT_ID["agent_err_" + ev]
    for cls, ev in (
        ("nixlNotPostedError", "not_posted"),
        ("nixlInvalidParamError", "invalid_param"),
        ("nixlBackendError", "backend"),
        ("nixlNotFoundError", "not_found"),
        ("nixlMismatchError", "mismatch"),
        ("nixlNotAllowedError", "not_allowed"),
        ("nixlRepostActiveError", "repost_active"),
        ("nixlUnknownError", "unknown"),
        ("nixlNotSupportedError", "not_supported"),
        ("nixlRemoteDisconnectError", "remote_disconnect"),
        ("nixlCancelledError", "canceled"),
        ("nixlNoTelemetryError", "no_telemetry"),
        ("nixlXferStalledError", "xfer_stalled"),
    )
}
_COUNTED = (
    "create_backend", "register_memory", "deregister_memory", "query_memory", "make_connection",
    "prep_xfer_dlist", "make_prepped_xfer", "initialize_xfer",
    "get_xfer_telemetry", "estimate_xfer_cost", "release_xfer_handle", "release_dlist_handle",
    "get_new_notifs", "update_notifs", "check_remote_xfer_done", "send_notif",
    "get_agent_metadata", "get_partial_agent_metadata", "add_remote_agent", "remove_remote_agent",
    "send_local_metadata", "send_partial_agent_metadata", "fetch_remote_metadata",
    "invalidate_local_metadata",
)
# transfer and check_xfer_state: the library counts the errors of posts and polls itself.


def _as_str(name: Union[str, bytes]) -> str:
    return name.decode() if isinstance(name, (bytes, bytearray)) else name


def _is_tensor(obj: Any) -> bool:
    return (
        callable(getattr(obj, "data_ptr", None))
        and callable(getattr(obj, "is_contiguous", None))
        and callable(getattr(obj, "element_size", None))
        and callable(getattr(obj, "numel", None))
        and hasattr(obj, "device")
    )


def _tensor_desc(t) -> tuple[Optional[tuple[int, int, int]], Optional[str]]:
    """(addr, len, dev) and mem name of a contiguous tensor, or (None, reason)."""
    if not t.is_contiguous():
        return None, "tensor is not contiguous"
    dev = t.device
    dev_type = getattr(dev, "type", str(dev))
    if dev_type == "cuda" or getattr(t, "is_cuda", False):
        index = getattr(dev, "index", None)
        if index is None:
            index = t.get_device() if callable(getattr(t, "get_device", None)) else 0
        mem = "VRAM"
        dev_id = int(index)
    elif dev_type == "cpu":
        mem = "DRAM"
        dev_id = 0
    else:
        return None, f"tensor device '{dev_type}' is not supported"
    return (int(t.data_ptr()), int(t.numel()) * int(t.element_size()), dev_id), mem


class nixl_agent:
    """A NIXL agent: registers memory, exchanges metadata and moves data with its backends.

    ``instantiate_all`` creates every backend this build has; it is ignored (with a warning)
    when a config is given, as in NIXL.
    """

    def __init__(
        self,
        agent_name: str,
        nixl_conf: Optional[nixl_agent_config] = None,
        instantiate_all: bool = False,
    ):
        if nixl_conf is not None and instantiate_all:
            logger.warning("nixl_agent: instantiate_all is ignored because a config was given")
            instantiate_all = False
        if nixl_conf is None:
            nixl_conf = nixl_agent_config()

        # Looked up on the module at construction time, so that tests can substitute it.
        self.agent = nixlBind.nixlAgent(agent_name, _binding_config(nixl_conf))
        # Events (NIXL's ring under NIXL_TELEMETRY_DIR, or NIXL_TELEMETRY_EXPORTER) are written
        # by the library; errors raised here are added to them.
        self._telemetry = bool(getattr(self.agent, "_telemetryExport", lambda: False)())
        if self._telemetry:
            self._count_errors()

        self.name = agent_name
        self._events = _fd_events(self.agent)
        self._leaked_xfer_handles: list[int] = []
        self.notifs: dict[str, list[bytes]] = {}
        self.aborted_notifs: dict[str, list[bytes]] = {}
        self.backends: dict[str, int] = {}
        self.backend_mems: dict[str, list[str]] = {}
        self.backend_options: dict[str, dict[str, str]] = {}

        self.plugin_list = self.agent.getAvailPlugins()
        if len(self.plugin_list) == 0:
            raise RuntimeError("No plugins available for NIXL, cannot start transfers")
        self.plugin_b_options: dict[str, dict[str, str]] = {}
        self.plugin_mem_types: dict[str, list[str]] = {}

        wanted = list(self.plugin_list) if instantiate_all else nixl_conf.backends
        for bknd in wanted:
            if bknd not in self.plugin_list:
                logger.warning("Skipping backend %s: no such plugin (have %s)", bknd, self.plugin_list)
                continue
            init: dict[str, str] = {}
            if nixl_conf.num_threads > 0 and bknd in _THREADS_PARAM:
                init[_THREADS_PARAM[bknd]] = str(nixl_conf.num_threads)
            if not instantiate_all:
                self.create_backend(bknd, init)  # a backend the caller named: errors propagate
                continue
            try:
                self.create_backend(bknd, init)
            except RuntimeError as e:  # nixl*Error: this backend cannot start on this machine
                logger.warning("instantiate_all: backend %s was not created: %s", bknd, e)

        self.nixl_mems = {
            "DRAM": nixlBind.DRAM_SEG,
            "VRAM": nixlBind.VRAM_SEG,
            "FILE": nixlBind.FILE_SEG,
            "BLOCK": nixlBind.BLK_SEG,
            "OBJ": nixlBind.OBJ_SEG,
            "cpu": nixlBind.DRAM_SEG,  # deprecated
            "cuda": nixlBind.VRAM_SEG,  # deprecated
        }
        self.nixl_ops = {"WRITE": nixlBind.NIXL_WRITE, "READ": nixlBind.NIXL_READ}

        logger.info("Initialized NIXL agent: %s", agent_name)

    def __del__(self):
        agent = getattr(self, "agent", None)
        if agent is None:
            return
        for h in getattr(self, "_leaked_xfer_handles", []):
            try:
                agent.releaseXferReq(h)
            except Exception as e:
                try:
                    logger.error("Failed to release leaked transfer handle 0x%x: %s", h, e)
                except Exception:
                    pass
        self._leaked_xfer_handles = []

    # ---- plugins and backends -------------------------------------------------------------

    def _load_plugin_params(self, plugin: str) -> None:
        if plugin not in self.plugin_list:
            return
        (params, mems) = self.agent.getPluginParams(plugin)
        self.plugin_b_options[plugin] = params
        self.plugin_mem_types[plugin] = mems

    def get_plugin_list(self) -> list[str]:
        return self.plugin_list

    def get_plugin_mem_types(self, backend: str) -> list[str]:
        if backend not in self.plugin_mem_types:
            self._load_plugin_params(backend)
        if backend not in self.plugin_mem_types:
            logger.warning("Plugin %s is not available to get its supported mem types", backend)
            return []
        return self.plugin_mem_types[backend]

    def get_plugin_params(self, backend: str) -> dict[str, str]:
        if backend not in self.plugin_b_options:
            self._load_plugin_params(backend)
        if backend not in self.plugin_b_options:
            logger.warning("Plugin %s is not available to get its parameters", backend)
            return {}
        return self.plugin_b_options[backend]

    def get_backend_mem_types(self, backend: str) -> list[str]:
        if backend in self.backend_mems:
            return self.backend_mems[backend]
        logger.warning("Backend %s not instantiated to get its supported mem types", backend)
        return []

    def get_backend_params(self, backend: str) -> dict[str, str]:
        if backend in self.backend_options:
            return self.backend_options[backend]
        logger.warning("Backend %s not instantiated to get its parameters", backend)
        return {}

    def create_backend(self, backend: str, initParams: dict[str, str] = {}) -> None:  # noqa: B006
        """Creates a backend; the parameters reach it unchanged (all values are strings)."""
        self.backends[backend] = self.agent.createBackend(backend, initParams)
        (options, mems) = self.agent.getBackendParams(self.backends[backend])
        self.backend_mems[backend] = mems
        self.backend_options[backend] = options
        logger.info("Backend %s was instantiated", backend)

    def _handles(self, backends: list[str]) -> list[int]:
        return [self.backends[b] for b in backends]  # KeyError for a name not created, as NIXL

    # ---- memory ---------------------------------------------------------------------------

    def register_memory(
        self, reg_list, mem_type: Optional[str] = None, backends: list[str] = []  # noqa: B006
    ) -> nixlBind.nixlRegDList:
        reg_descs = self.get_reg_descs(reg_list, mem_type)
        if reg_descs is None:
            raise TypeError("register_memory: could not make registration descriptors (see log)")
        self.agent.registerMem(reg_descs, self._handles(backends))
        return reg_descs

    def deregister_memory(self, dereg_list, backends: list[str] = []) -> None:  # noqa: B006
        """Deregisters what register_memory returned, as NIXL does even while prepared lists or
        transfer handles point into it; those fail their next use with nixlNotFoundError (an
        in-flight transfer completes first: the backend keeps the registration until then)."""
        descs = self.get_reg_descs(dereg_list)
        if descs is None:
            raise TypeError("deregister_memory: pass the nixlRegDList register_memory returned")
        self.agent.deregisterMem(descs, self._handles(backends))

    def query_memory(self, reg_list, backend: str, mem_type: Optional[str] = None):
        reg_descs = self.get_reg_descs(reg_list, mem_type)
        if backend not in self.backends:
            raise ValueError(
                f"query_memory: backend '{backend}' was not created; created backends: "
                f"{list(self.backends)}"
            )
        if reg_descs is None:
            raise TypeError("query_memory: could not make registration descriptors (see log)")
        return self.agent.queryMem(reg_descs, self.backends[backend])

    def make_connection(self, remote_agent: str, backends: list[str] = []) -> None:  # noqa: B006
        self.agent.makeConnection(remote_agent, self._handles(backends))

    # ---- transfers ------------------------------------------------------------------------

    def prep_xfer_dlist(
        self,
        agent_name: str,
        xfer_list,
        mem_type: Optional[str] = None,
        backends: list[str] = [],  # noqa: B006
    ) -> nixl_prepped_dlist_handle:
        """Prepares a list for make_prepped_xfer: local for "NIXL_INIT_AGENT" (or ""), else the
        named agent's side. `xfer_list` as for get_xfer_descs, or an Nx5 numpy array of strided
        rows (address, len, device ID, stride, count), uint64 or int64, C-contiguous, with
        `mem_type` given: the handle then indexes the rows' blocks in row order."""
        if agent_name == "NIXL_INIT_AGENT":
            agent_name = nixlBind.NIXL_INIT_AGENT
        backs = self._handles(backends)
        if isinstance(xfer_list, np.ndarray) and xfer_list.ndim == 2 and xfer_list.shape[1] == 5:
            if mem_type is None:
                raise ValueError("Please specify a mem type for strided descriptors")
            h = self.agent.prepXferDlist(agent_name, self._mem(mem_type), xfer_list, backs)
        else:
            descs = self.get_xfer_descs(xfer_list, mem_type)
            if descs is None:
                raise TypeError("prep_xfer_dlist: could not make transfer descriptors (see log)")
            h = self.agent.prepXferDlist(agent_name, descs, backs)
        return nixl_prepped_dlist_handle(self.agent, h)

    def estimate_xfer_cost(self, req_handle) -> tuple[int, int, str]:
        """(duration µs, error margin µs, method name) from the request's backend."""
        duration, err_margin, method = self.agent.estimateXferCost(int(req_handle))
        name = "ANALYTICAL_BACKEND" if method == nixlBind.NIXL_COST_ANALYTICAL_BACKEND else "UNKNOWN"
        return duration, err_margin, name

    def make_prepped_xfer(
        self,
        operation: str,
        local_xfer_side,
        local_indices,
        remote_xfer_side,
        remote_indices,
        notif_msg: bytes = b"",
        backends: list[str] = [],  # noqa: B006
        skip_desc_merge: bool = False,
    ) -> nixl_xfer_handle:
        op = self.nixl_ops[operation]
        h = self.agent.makeXferReq(
            op,
            int(local_xfer_side),
            local_indices,
            int(remote_xfer_side),
            remote_indices,
            notif_msg,
            self._handles(backends),
            skip_desc_merge,
        )
        return nixl_xfer_handle(self.agent, h, operation)

    def initialize_xfer(
        self,
        operation: str,
        local_descs,
        remote_descs,
        remote_agent: Union[str, bytes],
        notif_msg: bytes = b"",
        backends: list[str] = [],  # noqa: B006
    ) -> nixl_xfer_handle:
        op = self.nixl_ops[operation]
        h = self.agent.createXferReq(
            op, local_descs, remote_descs, remote_agent, notif_msg, self._handles(backends)
        )
        return nixl_xfer_handle(self.agent, h, operation)

    def transfer(self, handle, notif_msg: bytes = b"") -> str:
        # Negative statuses raise in the binding; 0 is NIXL_SUCCESS, 1 NIXL_IN_PROG.
        status = self.agent._post(handle, notif_msg)
        return _DONE if status == 0 else (_PROC if status == 1 else _ERR)

    def check_xfer_state(self, handle) -> str:
        status = self.agent._status(handle)
        return _DONE if status == 0 else (_PROC if status == 1 else _ERR)

    # ---- telemetry ------------------------------------------------------------------------

    def _count_errors(self) -> None:
        """Wraps the public methods of this agent so that the nixl errors they raise are
        written as agent_err_* events (once, by the outermost call)."""
        push = self.agent._telemetryEvent
        depth = threading.local()
        me = weakref.ref(self)  # no cycle through the instance: the agent still dies on `del`

        def wrap(fn):
            @functools.wraps(fn)
            def counted(*args, **kwargs):
                depth.n = getattr(depth, "n", 0) + 1
                try:
                    return fn(me(), *args, **kwargs)
                except RuntimeError as e:
                    ev = _ERROR_EVENTS.get(type(e))
                    if ev is not None and depth.n == 1:
                        push(ev, 1)
                    raise
                finally:
                    depth.n -= 1

            return counted

        for name in _COUNTED:
            setattr(self, name, wrap(getattr(type(self), name)))

    def get_xfer_telemetry(self, handle) -> nixlBind.nixlXferTelemetry:
        return self.agent.getXferTelemetry(int(handle))

    def query_xfer_backend(self, handle) -> str:
        bh = self.agent.queryXferBackend(int(handle))
        for name, h in self.backends.items():
            if h == bh:
                return name
        return ""

    def release_xfer_handle(self, handle) -> None:
        if isinstance(handle, nixl_xfer_handle):
            handle.release()
        else:
            self.agent.releaseXferReq(int(handle))

    def release_dlist_handle(self, handle) -> None:
        if isinstance(handle, nixl_prepped_dlist_handle):
            handle.release()
        else:
            self.agent.releasedDlistH(int(handle))

    def prep_mem_view(self, dlist, *, backends: Optional[list[str]] = None) -> int:
        return self.agent.prepMemView(dlist, self._handles(backends or []))

    def release_mem_view(self, mem_view: int) -> None:
        self.agent.releaseMemView(mem_view)

    # ---- notifications --------------------------------------------------------------------

    def get_new_notifs(self, backends: list[str] = []) -> dict[str, list[bytes]]:  # noqa: B006
        return self.agent.getNotifs({}, self._handles(backends))

    def update_notifs(self, backends: list[str] = []) -> dict[str, list[bytes]]:  # noqa: B006
        self.notifs = self.agent.getNotifs(self.notifs, self._handles(backends))
        return self.notifs

    # ---- waiting without polling (docs/waiting.md) ---------------------------------------

    def event_fd(self) -> int:
        """The agent's event fd: readable when a transfer of this agent ends or a notification
        arrives (for selectors, epoll, ``loop.add_reader``). When it turned readable call
        ``drain_events()``, then look (``check_xfer_state``, ``get_new_notifs``). The agent owns
        the fd: do not close it."""
        return self.agent.eventFd()

    fileno = event_fd

    def drain_events(self) -> None:
        self.agent.drainEvents()

    def wait_xfer_blocking(self, handle, timeout: Optional[float] = None) -> str:
        """Blocks (without the GIL) until the transfer ends or ``timeout`` seconds pass (None:
        no deadline); returns its state as ``check_xfer_state`` does ("PROC" at the deadline)."""
        status = self.agent.waitXferReq(handle, -1.0 if timeout is None else float(timeout))
        return _DONE if status == 0 else (_PROC if status == 1 else _ERR)

    def wait_notifs_blocking(
        self, timeout: Optional[float] = None, backends: list[str] = []  # noqa: B006
    ) -> dict[str, list[bytes]]:
        """Blocks (without the GIL) until a notification arrives or ``timeout`` seconds pass;
        returns the new ones as ``get_new_notifs`` does (empty at the deadline)."""
        t = -1.0 if timeout is None else float(timeout)
        return self.agent.waitNotifs({}, self._handles(backends), t)

    def peek_xfer_state(self, handle) -> str:
        """The transfer's state as ``check_xfer_state`` gives it, from what its backend already
        knows, without driving the transport: for a thread or event loop that wakes on
        ``event_fd()`` with many transfers in flight and looks at each (``check_xfer_state``
        would make progress once per transfer, a system call each over TCP). "PROC" while the
        backend's completion record says so; a backend that cannot be read that way, or a
        transfer past its stall timeout, gets ``check_xfer_state``'s answer."""
        status = self.agent.peekXferReq(handle)
        return _DONE if status == 0 else (_PROC if status == 1 else _ERR)

    async def wait_xfer(self, handle, timeout: Optional[float] = None) -> str:
        """Awaits the end of a transfer on the agent's event fd (asyncio); returns its state as
        ``check_xfer_state`` does, "PROC" when ``timeout`` seconds passed first. Each wake-up
        looks with ``peek_xfer_state``: many awaited transfers cost no progress calls."""

        def ended():
            status = self.agent.peekXferReq(handle)
            return None if status == 1 else (_DONE if status == 0 else _ERR)

        state = await self._events.until(ended, timeout)
        return _PROC if state is None else state

    async def wait_notifs(
        self, timeout: Optional[float] = None, backends: list[str] = []  # noqa: B006
    ) -> dict[str, list[bytes]]:
        """Awaits notifications on the agent's event fd (asyncio); returns the new ones as
        ``get_new_notifs`` does, empty when ``timeout`` seconds passed first."""
        handles = self._handles(backends)

        def arrived():
            got = self.agent.getNotifs({}, handles)
            return got if got else None

        got = await self._events.until(arrived, timeout)
        return got if got is not None else {}

    def check_remote_xfer_done(
        self,
        remote_agent_name: Union[str, bytes],
        lookup_tag: Union[bytes, str],
        backends: list[str] = [],  # noqa: B006
        tag_is_prefix: bool = True,
    ) -> bool:
        self.update_notifs(backends)
        return _take_match(self.notifs, remote_agent_name, lookup_tag, tag_is_prefix)

    # ---- abort notices (nixl-cpp's own; docs/error-model.md) -----------------------------

    def get_aborted_notifs(self, backends: list[str] = []) -> dict[str, list[bytes]]:  # noqa: B006
        """The abort notices that arrived since the last call: per initiator, the notification
        messages of its transfers to this agent that ended without success (an error, a release
        or a stall timeout while in flight). No notice is also a notification, and nothing of
        its transfer lands after it arrives. Sent by the UCX and LIBFABRIC backends."""
        return self.agent.getAbortedNotifs({}, self._handles(backends))

    def update_aborted_notifs(
        self, backends: list[str] = []  # noqa: B006
    ) -> dict[str, list[bytes]]:
        self.aborted_notifs = self.agent.getAbortedNotifs(
            self.aborted_notifs, self._handles(backends)
        )
        return self.aborted_notifs

    def check_remote_xfer_aborted(
        self, remote_agent_name, lookup_tag, backends: list[str] = [], tag_is_prefix=True  # noqa: B006
    ) -> bool:
        """As ``check_remote_xfer_done``, for abort notices: True (and the notice is consumed)
        when a transfer of ``remote_agent_name`` whose notification matches ended without
        success."""
        self.update_aborted_notifs(backends)
        return _take_match(self.aborted_notifs, remote_agent_name, lookup_tag, tag_is_prefix)

    def get_gone_agents(self, backends: list[str] = []) -> list[str]:  # noqa: B006
        """Names of the remote agents a backend found gone (their process ended, their host is
        no longer reached): peers whose metadata is loaded, and agents of any host that only
        sent to this one (an agent that loads this one's metadata is watched by it, with UCX and
        LIBFABRIC). A name stays until it comes back (loaded again, or a new process of it
        loads this agent's)."""
        return list(self.agent.getGoneAgents(self._handles(backends)))

    def _remote_xfer_state(self, name, tag, backends, tag_is_prefix) -> Optional[str]:
        if self.check_remote_xfer_done(name, tag, backends, tag_is_prefix):
            return _DONE
        if self.check_remote_xfer_aborted(name, tag, backends, tag_is_prefix):
            return _ERR
        if _as_str(name) in self.get_gone_agents(backends):
            return _ERR  # its transfer will not come
        return None

    def wait_remote_xfer_blocking(
        self,
        remote_agent_name: Union[str, bytes],
        lookup_tag: Union[bytes, str],
        timeout: Optional[float] = None,
        backends: list[str] = [],  # noqa: B006
        tag_is_prefix: bool = True,
    ) -> str:
        """Blocks (without the GIL) until the notification of a peer's transfer arrives ("DONE"),
        or its abort notice or the peer's end (``get_gone_agents``) is learnt ("ERR"), or
        ``timeout`` seconds pass ("PROC")."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        handles = self._handles(backends)
        while True:
            state = self._remote_xfer_state(remote_agent_name, lookup_tag, backends, tag_is_prefix)
            if state is not None:
                return state
            left = -1.0 if deadline is None else deadline - time.monotonic()
            if deadline is not None and left <= 0:
                return _PROC
            notifs, aborts = self.agent.waitNotifsOrAborts(handles, left)
            _merge(self.notifs, notifs)
            _merge(self.aborted_notifs, aborts)

    async def wait_remote_xfer(
        self,
        remote_agent_name: Union[str, bytes],
        lookup_tag: Union[bytes, str],
        timeout: Optional[float] = None,
        backends: list[str] = [],  # noqa: B006
        tag_is_prefix: bool = True,
    ) -> str:
        """Awaits (asyncio, on the agent's event fd) the notification of a peer's transfer
        ("DONE"), or its abort notice or the peer's end ("ERR"); "PROC" when ``timeout`` seconds
        passed first."""
        state = await self._events.until(
            lambda: self._remote_xfer_state(remote_agent_name, lookup_tag, backends, tag_is_prefix),
            timeout,
        )
        return _PROC if state is None else state

    def send_notif(
        self, remote_agent_name: Union[str, bytes], notif_msg: bytes, backend: Optional[str] = None
    ) -> None:
        handles = [self.backends[backend]] if backend is not None else []
        self.agent.genNotif(remote_agent_name, notif_msg, handles)

    # ---- metadata -------------------------------------------------------------------------

    def get_agent_metadata(self) -> bytes:
        return self.agent.getLocalMD()

    def _partial_descs(self, descs) -> nixlBind.nixlRegDList:
        if descs is None:
            return nixlBind.nixlRegDList(nixlBind.DRAM_SEG)
        reg = self.get_reg_descs(descs)
        if reg is None:
            raise TypeError("partial metadata: pass a nixlRegDList (or None for connection info)")
        return reg

    def get_partial_agent_metadata(
        self, descs, inc_conn_info: bool = False, backends: list[str] = []  # noqa: B006
    ) -> bytes:
        return self.agent.getLocalPartialMD(
            self._partial_descs(descs), inc_conn_info, self._handles(backends)
        )

    def add_remote_agent(self, metadata: bytes) -> bytes:
        return self.agent.loadRemoteMD(metadata)

    def remove_remote_agent(self, agent: Union[str, bytes]) -> None:
        """Forgets a peer. A peer already dropped because a backend found it dead is removed
        quietly; a name never loaded (or removed before) raises nixlNotFoundError, as in NIXL."""
        self.agent.invalidateRemoteMD(agent)

    def send_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        self.agent.sendLocalMD(ip_addr, port)

    def send_partial_agent_metadata(
        self,
        descs,
        inc_conn_info: bool = False,
        backends: list[str] = [],  # noqa: B006
        ip_addr: str = "",
        port: int = DEFAULT_COMM_PORT,
        label: str = "",
    ) -> None:
        self.agent.sendLocalPartialMD(
            self._partial_descs(descs), inc_conn_info, self._handles(backends), ip_addr, port, label
        )

    def fetch_remote_metadata(
        self,
        remote_agent: Union[str, bytes],
        ip_addr: str = "",
        port: int = DEFAULT_COMM_PORT,
        label: str = "",
    ) -> None:
        self.agent.fetchRemoteMD(remote_agent, ip_addr, port, label)

    def invalidate_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        self.agent.invalidateLocalMD(ip_addr, port)

    def check_remote_metadata(self, agent: Union[str, bytes], descs=None) -> bool:
        if descs is None:
            descs = nixlBind.nixlXferDList(nixlBind.DRAM_SEG)
        else:
            descs = self.get_xfer_descs(descs)
            if descs is None:
                raise TypeError("check_remote_metadata: pass a nixlXferDList")
        return self.agent.checkRemoteMD(agent, descs) == nixlBind.NIXL_SUCCESS

    # Not in NIXL: the port the metadata listener bound (handy with listen_port=0).
    @property
    def listen_port(self) -> int:
        return self.agent.getListenPort()

    # ---- descriptors ----------------------------------------------------------------------

    def _mem(self, mem_type):
        if isinstance(mem_type, nixlBind.nixl_mem_t):
            return mem_type
        return self.nixl_mems[mem_type]  # KeyError for an unknown name, as in NIXL

    def _make_descs(self, descs, mem_type, reg: bool):
        cls = nixlBind.nixlRegDList if reg else nixlBind.nixlXferDList
        what = "registration" if reg else "transfer"
        arity = 4 if reg else 3
        if isinstance(descs, cls):
            return descs
        if isinstance(descs, (nixlBind.nixlXferDList, nixlBind.nixlRegDList, nixlBind.nixlRemoteDList)):
            logger.error(
                "%s descriptors needed, got a %s%s", what, type(descs).__name__,
                "; pass reg_list.trim() for transfers" if not reg else "",
            )
            return None
        if isinstance(descs, np.ndarray):
            if mem_type is None:
                logger.error("Please specify a mem type if not using Tensors")
                return None
            if descs.ndim != 2 or descs.shape[-1] != 3:
                logger.error("Please provide an Nx3 numpy array of (addr, len, dev)")
                return None
            return cls(self._mem(mem_type), np.ascontiguousarray(descs))
        if _is_tensor(descs):
            d, mem = _tensor_desc(descs)
            if d is None:
                logger.error("Cannot use tensor: %s", mem)
                return None
            return cls(self._mem(mem), [d + ("",)] if reg else [d])
        if isinstance(descs, (list, tuple)):
            descs = list(descs)
            if len(descs) == 0:
                if mem_type is None:
                    logger.error("Please specify a mem type for an empty list")
                    return None
                return cls(self._mem(mem_type))
            first = descs[0]
            if isinstance(first, tuple):
                if mem_type is None:
                    logger.error("Please specify a mem type if not using Tensors")
                    return None
                if len(first) != arity:
                    logger.error("%d-tuple list needed for %s", arity, what)
                    return None
                return cls(self._mem(mem_type), descs)
            if _is_tensor(first):
                out = []
                mem0 = None
                dev0 = None
                for t in descs:
                    if not _is_tensor(t):
                        logger.error("Please use a list of contiguous Tensors")
                        return None
                    d, mem = _tensor_desc(t)
                    if d is None:
                        logger.error("Cannot use tensor: %s", mem)
                        return None
                    if mem0 is None:
                        mem0, dev0 = mem, d[2]
                    elif mem != mem0 or d[2] != dev0:
                        logger.error("Please use a list of Tensors on the same device")
                        return None
                    out.append(d + ("",) if reg else d)
                return cls(self._mem(mem0), out)
            logger.error("Please use a list of tuples or Tensors")
            return None
        logger.error("Unsupported %s descriptor input: %s", what, type(descs).__name__)
        return None

    def get_xfer_descs(self, descs, mem_type: Optional[str] = None) -> Optional[nixlBind.nixlXferDList]:
        return self._make_descs(descs, mem_type, reg=False)

    def get_reg_descs(self, descs, mem_type: Optional[str] = None) -> Optional[nixlBind.nixlRegDList]:
        return self._make_descs(descs, mem_type, reg=True)

    def get_remote_descs(self, descs, mem_type: Optional[str] = None):
        if isinstance(descs, nixlBind.nixlRemoteDList):
            return descs
        if isinstance(descs, list) and (len(descs) == 0 or isinstance(descs[0], tuple)):
            if mem_type is None:
                logger.error("Please specify a mem type")
                return None
            if descs and len(descs[0]) != 4:
                logger.error("4-tuple list (addr, len, dev, agent) needed for remote descriptors")
                return None
            return nixlBind.nixlRemoteDList(self._mem(mem_type), descs)
        logger.error("Unsupported remote descriptor input: %s", type(descs).__name__)
        return None

    def get_serialized_descs(self, descs) -> bytes:
        """Encodes a descriptor list with the library's codec (not pickle)."""
        return nixlBind._serialize_descs(descs)

    def deserialize_descs(self, serialized_descs: bytes):
        """Decodes ``get_serialized_descs`` output; raises nixlMismatchError on bad bytes."""
        if not isinstance(serialized_descs, (bytes, bytearray, memoryview)):
            raise TypeError("deserialize_descs: pass bytes")
        return nixlBind._deserialize_descs(bytes(serialized_descs))


__all__ = [
    "DEFAULT_COMM_PORT",
    "nixl_agent",
    "nixl_agent_config",
    "nixl_backend_handle",
    "nixl_prepped_dlist_handle",
    "nixl_thread_sync_t",
    "nixl_xfer_handle",
]
