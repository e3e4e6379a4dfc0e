"""Agent telemetry events: NIXL's shared-memory ring and a reader (``python3 -m nixl.telemetry``).

The library writes the events of every agent (C++ or Python) with telemetry on
(``NIXL_TELEMETRY_ENABLE`` truthy, or unset and ``capture_telemetry=True``) to NIXL's ring
``$NIXL_TELEMETRY_DIR/<agent name>`` when that variable is set, in NIXL's layout (version 4),
so NIXL's own readers read it too:

    header, 40 bytes, native (x86_64/aarch64: little-endian, 8-byte size_t)
      0  u64 write_pos    8 u64 read_pos   16 i32 version (4)   20 i32 expected_version (4)
      24 u64 capacity (a power of two)    32 u64 mask (capacity - 1)
    then `capacity` events of 16 bytes: u32 event id, u32 padding, u64 value

Positions are slot indices: the writer stores an event at ``write_pos`` and then moves it to
``(write_pos + 1) & mask``; a reader consumes slots from ``read_pos`` up to ``write_pos`` and
then stores ``read_pos``. A full ring (one slot kept free) loses events, reported later as
``agent_telemetry_events_dropped``. Event ids and names are NIXL's (``EVENTS``).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import time
from typing import Iterator

VERSION = 4
HEADER = struct.Struct("=QQiiQQ")
EVENT = struct.Struct("=IIQ")
_POS = struct.Struct("=Q")
WRITE_POS_OFF, READ_POS_OFF = 0, 8
DEFAULT_CAPACITY = 4096

EVENTS = [
    "agent_tx_bytes",
    "agent_rx_bytes",
    "agent_tx_requests_num",
    "agent_rx_requests_num",
    "agent_memory_registered",
    "agent_memory_deregistered",
    "agent_xfer_time",
    "agent_xfer_post_time",
    "agent_err_not_posted",
    "agent_err_invalid_param",
    "agent_err_backend",
    "agent_err_not_found",
    "agent_err_mismatch",
    "agent_err_not_allowed",
    "agent_err_repost_active",
    "agent_err_unknown",
    "agent_err_not_supported",
    "agent_err_remote_disconnect",
    "agent_err_canceled",
    "agent_err_no_telemetry",
    "agent_telemetry_events_dropped",
    "agent_err_xfer_stalled",
]
EVENT_ID = {n: i for i, n in enumerate(EVENTS)}
_TRUE = ("1", "y", "yes", "on", "true", "enable")


def enabled(capture_telemetry: bool) -> bool:
    """NIXL's rule: NIXL_TELEMETRY_ENABLE wins when set, else the config flag."""
    env = os.environ.get("NIXL_TELEMETRY_ENABLE")
    if env is None:
        return bool(capture_telemetry)
    return env.strip().lower() in _TRUE


def ring_path(directory: str, agent_name: str) -> str:
    """Where the library writes the ring of `agent_name` (NIXL: the name as it is)."""
    return os.path.join(directory, agent_name.replace("/", "_"))


class Reader:
    """The consumer side of a ring: ``read()`` returns the events written since the last call."""

    def __init__(self, path: str):
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER.size:
                raise ValueError(f"{path}: {size} bytes is too small for a telemetry ring")
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        _, _, version, expected, cap, mask = HEADER.unpack_from(self._mm, 0)
        if version != VERSION:
            self._mm.close()
            raise ValueError(f"{path}: Version mismatch: expected {VERSION}, got {version}")
        if cap < 2 or cap & (cap - 1) or mask != cap - 1 or HEADER.size + cap * EVENT.size > size:
            self._mm.close()
            raise ValueError(f"{path}: capacity {cap} (mask {mask}) does not fit the file")
        self.path = path
        self.capacity = cap
        self._mask = mask

    def read(self) -> list[tuple[str, int]]:
        """(event name, value) of every event not read yet, oldest first."""
        mm = self._mm
        write = _POS.unpack_from(mm, WRITE_POS_OFF)[0] & self._mask
        read = _POS.unpack_from(mm, READ_POS_OFF)[0] & self._mask
        out = []
        while read != write:
            ev, _, value = EVENT.unpack_from(mm, HEADER.size + read * EVENT.size)
            out.append((EVENTS[ev] if ev < len(EVENTS) else f"event_{ev}", value))
            read = (read + 1) & self._mask
        _POS.pack_into(mm, READ_POS_OFF, read)
        return out

    def close(self) -> None:
        self._mm.close()


def _follow(paths: list[str], follow: bool, interval: float) -> Iterator[str]:
    readers = [Reader(p) for p in paths]
    while True:
        for r in readers:
            name = os.path.basename(r.path)
            for ev, value in r.read():
                yield f"{name} {ev} {value}"
        if not follow:
            return
        time.sleep(interval)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python3 -m nixl.telemetry",
        description="Prints (and consumes) the telemetry events of nixl agents: one line per "
                    "event, 'agent event value'.")
    ap.add_argument("path", help="a ring file, or NIXL_TELEMETRY_DIR to read every ring in it")
    ap.add_argument("-f", "--follow", action="store_true", help="keep reading new events")
    ap.add_argument("--interval", type=float, default=0.1, help="poll period with --follow (s)")
    args = ap.parse_args(argv)
    if os.path.isdir(args.path):
        paths = sorted(os.path.join(args.path, n) for n in os.listdir(args.path)
                       if os.path.isfile(os.path.join(args.path, n)))
    else:
        paths = [args.path]
    try:
        for line in _follow(paths, args.follow, args.interval):
            print(line, flush=True)
    except ValueError as e:
        print(f"nixl.telemetry: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
