"""pytest setup: finds the nixl package and offers small helpers.

Run from a build tree with PYTHONPATH=<build>/python (ctest -L python does that), or set
NIXL_PYTHON_PATH to the folder that holds the `nixl` package.
"""

import os
import sys
import time

_extra = os.environ.get("NIXL_PYTHON_PATH")
if _extra and _extra not in sys.path:
    sys.path.insert(0, _extra)

import pytest  # noqa: E402

import nixl  # noqa: E402,F401
from nixl import _bindings  # noqa: E402

BUILT = set(_bindings._BUILT_BACKENDS)

needs_ucx = pytest.mark.skipif("UCX" not in BUILT, reason="built without the UCX backend")
needs_posix = pytest.mark.skipif("POSIX" not in BUILT, reason="built without the POSIX backend")


def wait_for(pred, timeout=10.0, what="condition"):
    """Polls `pred` until it is true; fails the test after `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.001)


def wait_done(agent, handle, timeout=10.0):
    """Polls a transfer until it leaves PROC; returns the final state."""
    end = time.monotonic() + timeout
    while True:
        s = agent.check_xfer_state(handle)
        if s != "PROC":
            return s
        if time.monotonic() > end:
            pytest.fail("transfer did not complete")


def write_after_exchange(user, owner, src, dst, tag):
    """Sends `user`'s full metadata to `owner` through the central store, then WRITEs `src` to
    `dst` (owner's, already known to `user`) with notification `tag` and waits for both ends."""
    user.send_local_metadata()
    owner.fetch_remote_metadata(user.name)
    wait_for(lambda: owner.check_remote_metadata(user.name), what="user's full metadata")

    h = user.initialize_xfer("WRITE", src.trim(), dst.trim(), owner.name, tag)
    user.transfer(h)
    assert wait_done(user, h) == "DONE"
    wait_for(lambda: owner.check_remote_xfer_done(user.name, tag), what="notification")
    h.release()


_counter = [0]


@pytest.fixture
def unique_name():
    """A fresh agent-name prefix per test (agents in one process must not share names)."""

    def make(base):
        _counter[0] += 1
        return f"{base}-{os.getpid()}-{_counter[0]}"

    return make


@pytest.fixture
def caplog(caplog):
    """pytest's caplog, also attached to the `nixl` logger (which, as NIXL's, does not propagate)."""
    import logging

    log = logging.getLogger("nixl")
    log.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        log.removeHandler(caplog.handler)
