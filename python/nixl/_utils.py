"""Test helpers of NIXL's ``nixl._utils``: raw host buffers addressed by integers."""

import ctypes as _ctypes
import ctypes.util as _ctypes_util

_libc = _ctypes.CDLL(_ctypes_util.find_library("c") or "libc.so.6", use_errno=True)
_libc.aligned_alloc.restype = _ctypes.c_void_p
_libc.aligned_alloc.argtypes = [_ctypes.c_size_t, _ctypes.c_size_t]
_libc.free.restype = None
_libc.free.argtypes = [_ctypes.c_void_p]
_libc.memcmp.restype = _ctypes.c_int
_libc.memcmp.argtypes = [_ctypes.c_void_p, _ctypes.c_void_p, _ctypes.c_size_t]

_ALIGN = 4096


def malloc_passthru(size: int) -> int:
    """Allocates ``size`` bytes aligned to 4096 and returns the address (0 on failure)."""
    if size < 0:
        raise ValueError("malloc_passthru: size must not be negative")
    rounded = max(_ALIGN, (size + _ALIGN - 1) // _ALIGN * _ALIGN)
    return _libc.aligned_alloc(_ALIGN, rounded) or 0


def free_passthru(addr: int) -> None:
    """Frees memory from ``malloc_passthru``."""
    _libc.free(addr)


def ba_buf(addr: int, size: int) -> None:
    """Fills ``size`` bytes at ``addr`` with 0xba."""
    _ctypes.memset(addr, 0xBA, size)


def verify_transfer(addr1: int, addr2: int, size: int) -> None:
    """Asserts that ``size`` bytes at the two addresses are equal."""
    assert _libc.memcmp(addr1, addr2, size) == 0, "verify_transfer: buffers differ"
