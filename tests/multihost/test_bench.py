"""nixl-bench between sandbox hosts: --role target/initiator meeting through the listener on a
host address, and through etcd (--etcd_endpoints); small sizes, data checked."""

import csv
import os
import time

import pytest

BENCH = os.environ.get("NIXL_MH_BENCH", "")

pytestmark = pytest.mark.skipif(not (BENCH and os.access(BENCH, os.X_OK)),
                                reason="nixl-bench not built (NIXL_MH_BENCH unset)")

SIZES = ["--start_block_size", "4K", "--max_block_size", "1M", "--start_batch_size", "1",
         "--max_batch_size", "4", "--num_iter", "20", "--warmup_iter", "2",
         "--total_buffer_size", "64M", "--check_consistency", "--output_format", "csv"]


@pytest.mark.parametrize("meet", ["listener", "etcd"])
@pytest.mark.parametrize("op", ["WRITE", "READ"])
def test_bench_across_hosts(sandbox, meet, op):
    sb = sandbox(3 if meet == "etcd" else 2)
    if meet == "etcd":
        url = sb.start_etcd(2)
        tside = ["--etcd_endpoints", url]
        iside = ["--etcd_endpoints", url]
    else:
        tside = ["--listen_address", sb.addr(1), "--port", "5555"]
        iside = ["--peer_ip", sb.addr(1), "--port", "5555"]
    tgt = sb.start(1, [BENCH, "--role", "target"] + tside + SIZES, "bench-target.log")
    log = os.path.join(sb.dir, "bench-target.log")
    end = time.monotonic() + 60
    while "waiting for the initiator" not in open(log, errors="replace").read():
        assert tgt.poll() is None, open(log, errors="replace").read()
        assert time.monotonic() < end, "the target did not start"
        time.sleep(0.05)
    r = sb.run(0, [BENCH, "--role", "initiator", "--op_type", op] + iside + SIZES, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(csv.DictReader(r.stdout.strip().splitlines()))
    assert len(rows) >= 9, r.stdout
    for row in rows:
        assert float(row["gbps"]) > 0, row
        assert row["checked"] == "1", f"data not checked: {row}"
    assert tgt.wait(30) == 0
