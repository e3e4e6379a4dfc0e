"""Agent telemetry events in a shared-memory ring, and a reader (``python3 -m nixl.telemetry``).

An agent writes events when telemetry is on (``NIXL_TELEMETRY_ENABLE`` truthy, or unset and
``nixl_agent_config(capture_telemetry=True)``) and ``NIXL_TELEMETRY_DIR`` names a folder: the
ring is the file ``$NIXL_TELEMETRY_DIR/<agent name>``, mapped shared, so another process reads
it while the agent runs. The format is this library's own (docs/python.md, "Telemetry"):

    header, 64 bytes, little-endian
      0  8s  magic  b"NXTELEM\\0"
      8  u32 version (1)            12 u32 event size (24)
      16 u64 capacity (events, a power of two)
      24 u64 write position (events ever written; only the writer stores it)
      32 u64 read position  (events ever consumed; only the reader stores it)
      40 u64 dropped (events lost because the ring was full)
      48 u64 writer pid             56 u64 reserved
    then `capacity` events of 24 bytes
      u64 time (µs since the Unix epoch), u32 event id, u32 reserved, u64 value

Event i lives in slot ``i % capacity``. The writer fills the slot, then advances the write
position; the reader consumes ``[read, write)`` and then advances the read position. When the
ring is full the writer drops the event and counts it. Event ids and names are NIXL's.

``NIXL_TELEMETRY_BUFFER_SIZE`` (events, a power of two, default 4096) sizes the ring;
``NIXL_TELEMETRY_ENABLED_METRICS`` (comma-separated shell patterns over event names) filters
what is written.
"""

from __future__ import annotations

import fnmatch
import mmap
import os
import struct
import sys
import time
from typing import Iterator, Optional

MAGIC = b"NXTELEM\0"
VERSION = 1
HEADER = struct.Struct("<8sIIQQQQQQ")
EVENT = struct.Struct("<QIIQ")
_POS = struct.Struct("<Q")
WRITE_POS_OFF, READ_POS_OFF, DROPPED_OFF = 24, 32, 40
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
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in agent_name) or "_"
    return os.path.join(directory, safe)


class Writer:
    """The producer side of one agent's ring."""

    def __init__(self, path: str, capacity: int = DEFAULT_CAPACITY, patterns=None):
        if capacity <= 0 or capacity & (capacity - 1):
            raise ValueError(f"telemetry ring capacity {capacity} is not a power of two")
        self.path = path
        self.capacity = capacity
        self._mask = capacity - 1
        self._wanted = [
            n in EVENT_ID and (not patterns or any(fnmatch.fnmatch(n, p) for p in patterns))
            for n in EVENTS
        ]
        size = HEADER.size + capacity * EVENT.size
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, size)
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._mm[: HEADER.size] = HEADER.pack(
            MAGIC, VERSION, EVENT.size, capacity, 0, 0, 0, os.getpid(), 0)
        self._write = 0

    def push(self, event: int, value: int) -> bool:
        """Appends one event; False when filtered out or dropped (ring full)."""
        if not self._wanted[event]:
            return False
        mm = self._mm
        read = _POS.unpack_from(mm, READ_POS_OFF)[0]
        if self._write - read >= self.capacity:
            dropped = _POS.unpack_from(mm, DROPPED_OFF)[0]
            _POS.pack_into(mm, DROPPED_OFF, dropped + 1)
            return False
        off = HEADER.size + (self._write & self._mask) * EVENT.size
        EVENT.pack_into(mm, off, time.time_ns() // 1000, event, 0, max(0, int(value)))
        self._write += 1
        _POS.pack_into(mm, WRITE_POS_OFF, self._write)  # publish after the slot is written
        return True

    def close(self) -> None:
        mm, self._mm = getattr(self, "_mm", None), None
        if mm is not None:
            mm.close()


def writer_for(agent_name: str, capture_telemetry: bool) -> Optional[Writer]:
    """A Writer when telemetry is on and NIXL_TELEMETRY_DIR is set, else None."""
    directory = os.environ.get("NIXL_TELEMETRY_DIR")
    if not directory or not enabled(capture_telemetry):
        return None
    raw = os.environ.get("NIXL_TELEMETRY_BUFFER_SIZE", str(DEFAULT_CAPACITY))
    try:
        capacity = int(raw, 0)
    except ValueError:
        capacity = -1
    if capacity <= 0 or capacity & (capacity - 1):
        from nixl.logging import get_logger

        get_logger("telemetry").warning(
            "NIXL_TELEMETRY_BUFFER_SIZE=%r is not a power of two; using %d", raw, DEFAULT_CAPACITY)
        capacity = DEFAULT_CAPACITY
    patterns = [p.strip() for p in os.environ.get("NIXL_TELEMETRY_ENABLED_METRICS", "").split(",")]
    os.makedirs(directory, exist_ok=True)
    return Writer(ring_path(directory, agent_name), capacity, [p for p in patterns if p])


class Reader:
    """The consumer side: ``read()`` returns the events written since the last call."""

    def __init__(self, path: str):
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER.size:
                raise ValueError(f"{path}: {size} bytes is too small for a telemetry ring")
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        magic, version, esize, cap, *_ = HEADER.unpack_from(self._mm, 0)
        if magic != MAGIC:
            raise ValueError(f"{path}: not a nixl telemetry ring (bad magic)")
        if version != VERSION or esize != EVENT.size:
            raise ValueError(f"{path}: ring version {version} (event size {esize}); this reader "
                             f"reads version {VERSION}")
        if cap <= 0 or cap & (cap - 1) or HEADER.size + cap * EVENT.size > size:
            raise ValueError(f"{path}: capacity {cap} does not fit the file")
        self.path = path
        self.capacity = cap
        self.pid = HEADER.unpack_from(self._mm, 0)[7]

    @property
    def dropped(self) -> int:
        return _POS.unpack_from(self._mm, DROPPED_OFF)[0]

    def read(self) -> list[tuple[int, str, int]]:
        """(time µs, event name, value) of every event not read yet, oldest first."""
        mm = self._mm
        write = _POS.unpack_from(mm, WRITE_POS_OFF)[0]
        read = _POS.unpack_from(mm, READ_POS_OFF)[0]
        if write - read > self.capacity:  # cannot happen with a well-behaved writer
            read = write - self.capacity
        out = []
        for i in range(read, write):
            t, ev, _, value = EVENT.unpack_from(mm, HEADER.size + (i % self.capacity) * EVENT.size)
            out.append((t, EVENTS[ev] if ev < len(EVENTS) else f"event_{ev}", value))
        _POS.pack_into(mm, READ_POS_OFF, write)
        return out

    def close(self) -> None:
        self._mm.close()


def _follow(paths: list[str], follow: bool, interval: float) -> Iterator[str]:
    readers = [Reader(p) for p in paths]
    while True:
        for r in readers:
            name = os.path.basename(r.path)
            for t, ev, value in r.read():
                yield f"{t / 1e6:.6f} {name} {ev} {value}"
        if not follow:
            return
        time.sleep(interval)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python3 -m nixl.telemetry",
        description="Prints (and consumes) the telemetry events of nixl agents: one line per "
                    "event, 'seconds agent event value'.")
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
