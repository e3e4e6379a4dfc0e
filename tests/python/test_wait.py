"""Waiting without polling: the agent's event fd, asyncio awaits and blocking waits (UCX)."""

import asyncio
import select
import time

import numpy as np
import pytest

import nixl
from nixl._api import nixl_agent

from conftest import needs_ucx

N = 1 << 20
SLACK = 0.5  # a wait may end late by a few time slices on a busy 2-core machine


@pytest.fixture
def pair(unique_name):
    ini = nixl_agent(unique_name("wini"))
    tgt = nixl_agent(unique_name("wtgt"))
    src = np.arange(N, dtype=np.uint64).astype(np.uint8)
    dst = np.zeros(N, dtype=np.uint8)
    ini_reg = ini.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    tgt_reg = tgt.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    ini.add_remote_agent(tgt.get_agent_metadata())
    tgt.add_remote_agent(ini.get_agent_metadata())
    yield ini, tgt, src, dst, ini_reg, tgt_reg
    ini.deregister_memory(ini_reg)
    tgt.deregister_memory(tgt_reg)


@needs_ucx
def test_event_fd_is_a_readable_fd(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair
    fd = ini.event_fd()
    assert isinstance(fd, int) and fd >= 0 and ini.fileno() == fd
    assert tgt.event_fd() != fd
    ini.drain_events()
    tgt.drain_events()
    h = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name, b"fd-tag")
    assert ini.transfer(h) in ("DONE", "PROC")
    r, _, _ = select.select([fd], [], [], 30.0)
    assert r == [fd]  # the completion signalled it
    assert ini.wait_xfer_blocking(h, timeout=30.0) == "DONE"
    r, _, _ = select.select([tgt.fileno()], [], [], 30.0)
    assert r == [tgt.fileno()]  # and the notification the target's
    got = tgt.wait_notifs_blocking(timeout=30.0)
    assert got == {ini.name: [b"fd-tag"]}
    assert np.array_equal(src, dst)
    h.release()


@needs_ucx
def test_blocking_waits_end_at_their_deadline(pair):
    ini, tgt, *_ = pair
    t0 = time.monotonic()
    assert tgt.wait_notifs_blocking(timeout=0.1) == {}
    took = time.monotonic() - t0
    assert 0.1 <= took < 0.1 + SLACK


@needs_ucx
def test_asyncio_awaits_a_transfer_and_a_notification(pair):
    ini, tgt, src, dst, ini_reg, tgt_reg = pair

    async def main():
        h = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name, b"aio-1")
        notif = asyncio.ensure_future(tgt.wait_notifs(timeout=30.0))
        assert ini.transfer(h) in ("DONE", "PROC")
        state = await ini.wait_xfer(h, timeout=30.0)
        got = await notif
        h.release()
        return state, got

    state, got = asyncio.run(main())
    assert state == "DONE"
    assert got == {ini.name: [b"aio-1"]}
    assert np.array_equal(src, dst)


@needs_ucx
def test_asyncio_waits_end_at_their_deadline_and_the_loop_stays_free(pair):
    ini, tgt, *_ = pair

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.ensure_future(ticker())
        t0 = time.monotonic()
        got = await tgt.wait_notifs(timeout=0.2)
        took = time.monotonic() - t0
        t.cancel()
        return got, took, ticks

    got, took, ticks = asyncio.run(main())
    assert got == {}
    assert 0.2 <= took < 0.2 + SLACK
    assert ticks >= 2  # the wait did not block the event loop


@needs_ucx
def test_many_transfers_awaited_at_once_and_peeked(unique_name, monkeypatch):
    # Over tcp the puts stay in flight after the post; every await looks with peek_xfer_state.
    monkeypatch.setenv("UCX_TLS", "tcp")
    k, n = 16, 256 << 10
    ini = nixl_agent(unique_name("pini"))
    tgt = nixl_agent(unique_name("ptgt"))
    src = np.random.default_rng(5).integers(0, 256, k * n, dtype=np.uint8)
    dst = np.zeros(k * n, dtype=np.uint8)
    ini_reg = ini.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    tgt_reg = tgt.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    ini.add_remote_agent(tgt.get_agent_metadata())
    handles = []
    for i in range(k):
        here = ini.get_xfer_descs([(src.ctypes.data + i * n, n, 0)], "DRAM")
        there = tgt.get_xfer_descs([(dst.ctypes.data + i * n, n, 0)], "DRAM")
        handles.append(ini.initialize_xfer("WRITE", here, there, tgt.name, f"p{i}".encode()))

    async def main():
        for h in handles:
            assert ini.transfer(h) in ("DONE", "PROC")
        assert all(ini.peek_xfer_state(h) in ("DONE", "PROC") for h in handles)
        return await asyncio.gather(*(ini.wait_xfer(h, timeout=30.0) for h in handles))

    assert asyncio.run(main()) == ["DONE"] * k
    assert [ini.peek_xfer_state(h) for h in handles] == ["DONE"] * k
    assert np.array_equal(src, dst)
    got = tgt.wait_notifs_blocking(timeout=30.0)
    deadline = time.monotonic() + 30.0
    while sum(len(v) for v in got.values()) < k and time.monotonic() < deadline:
        for name, msgs in tgt.wait_notifs_blocking(timeout=1.0).items():
            got.setdefault(name, []).extend(msgs)
    assert sorted(got[ini.name]) == sorted(f"p{i}".encode() for i in range(k))
    for h in handles:
        h.release()
    with pytest.raises(nixl.nixlInvalidParamError):
        ini.peek_xfer_state(handles[0])  # released: as check_xfer_state
    ini.deregister_memory(ini_reg)
    tgt.deregister_memory(tgt_reg)
    del handles, ini, tgt


@needs_ucx
def test_a_stalled_transfer_sends_an_abort_notice(unique_name, monkeypatch):
    # Over tcp a put needs the target's worker: a target without a progress thread holds the
    # transfer until it waits (which progresses it).
    import datetime

    from nixl._api import nixl_agent_config

    monkeypatch.setenv("UCX_TLS", "tcp")
    n = 16 << 20
    ini = nixl_agent(
        unique_name("aini"),
        nixl_agent_config(xfer_stall_timeout=datetime.timedelta(milliseconds=200)),
    )
    tgt = nixl_agent(unique_name("atgt"), nixl_agent_config(enable_prog_thread=False))
    src = np.full(n, 7, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    ini_reg = ini.register_memory([(src.ctypes.data, n, 0, "")], "DRAM")
    tgt_reg = tgt.register_memory([(dst.ctypes.data, n, 0, "")], "DRAM")
    ini.add_remote_agent(tgt.get_agent_metadata())  # the target needs none of the initiator's
    h = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name, b"kv-9")
    assert ini.transfer(h) == "PROC"
    with pytest.raises(Exception) as stalled:
        deadline = time.monotonic() + 20
        while ini.check_xfer_state(h) == "PROC" and time.monotonic() < deadline:
            time.sleep(0.01)
    assert "stall" in type(stalled.value).__name__.lower()
    # the target learns it: "ERR" from the wait, never the notification
    t0 = time.monotonic()
    assert tgt.wait_remote_xfer_blocking(ini.name, b"kv-9", timeout=20.0) == "ERR"
    assert time.monotonic() - t0 < 20.0
    assert not tgt.check_remote_xfer_done(ini.name, b"kv-9")
    assert tgt.get_aborted_notifs() == {}  # consumed by the wait

    # A transfer that completes: "DONE" through the asyncio wait, no notice.
    h2 = ini.initialize_xfer("WRITE", ini_reg.trim(), tgt_reg.trim(), tgt.name, b"kv-10")

    async def main():
        waiting = asyncio.ensure_future(tgt.wait_remote_xfer(ini.name, b"kv-10", timeout=20.0))
        assert ini.transfer(h2) in ("DONE", "PROC")
        return await waiting

    assert asyncio.run(main()) == "DONE"
    assert ini.wait_xfer_blocking(h2, timeout=20.0) == "DONE"
    assert np.array_equal(src, dst)
    assert not tgt.check_remote_xfer_aborted(ini.name, b"kv-10")
    h2.release()
    h.release()
    ini.deregister_memory(ini_reg)
    tgt.deregister_memory(tgt_reg)
    del h, h2
    del ini  # first: the initiator's endpoints close while the target still answers
    del tgt
