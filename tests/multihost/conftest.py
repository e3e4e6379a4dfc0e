"""Multi-host test bed: sandbox hosts (sandbox.sh) and the agent programs that run in them.

Every agent runs inside a sandbox host: `node(...)` starts mh_node.py (NIXL's Python API) or
nixl_mh_node (the C++ API) there; both speak the line protocol of README.md. This process only
starts them, pipes commands and reads answers; it never touches the sandbox network.

Environment (set by CMake/ctest): NIXL_MH_NODE (C++ node executable), PYTHONPATH (the built
nixl package); optional NIXL_MH_KINDS ("cpp,py" by default) restricts the node kinds.
"""

import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SANDBOX = os.path.join(HERE, "sandbox.sh")
PY_NODE = os.path.join(HERE, "mh_node.py")
CPP_NODE = os.environ.get("NIXL_MH_NODE", "")
ETCD = os.environ.get("ETCD_BIN") or "/usr/bin/etcd"


def _on_term(signum, frame):
    # ctest's timeout (and other supervisors) stop us with SIGTERM: unwind, so that the
    # fixtures tear the sandboxes down. A SIGKILL leaves them to the next run's sweep.
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _on_term)


def _python_nodes_available():
    try:
        import numpy  # noqa: F401

        import nixl  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def node_kinds():
    """The node implementations this build can run: 'cpp' (C++ API) and 'py' (Python API)."""
    wanted = os.environ.get("NIXL_MH_KINDS", "cpp,py").split(",")
    kinds = []
    if "cpp" in wanted and CPP_NODE and os.access(CPP_NODE, os.X_OK):
        kinds.append("cpp")
    if "py" in wanted and _python_nodes_available():
        kinds.append("py")
    return kinds


class NodeError(AssertionError):
    pass


class Node:
    """One agent process inside a sandbox host."""

    def __init__(self, sandbox, host, kind, name, size=1 << 20, listen=False, port=0,
                 listen_address=None, secret=None, env=None, expect_ready=True, stall_ms=None):
        self.sb, self.host, self.kind, self.name = sandbox, host, kind, name
        argv = [sys.executable, PY_NODE] if kind == "py" else [CPP_NODE]
        argv += [name, "--size", str(size), "--port", str(port)]
        if listen:
            argv.append("--listen")
        if listen_address is not None:
            argv += ["--listen-address", listen_address]
        if secret is not None:
            argv += ["--secret", secret]
        if stall_ms is not None:
            argv += ["--stall-ms", str(stall_ms)]
        e = dict(os.environ)
        e.update(env or {})
        self.log_path = os.path.join(sandbox.dir, f"{name}-{len(sandbox.nodes)}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [SANDBOX, "exec", sandbox.dir, str(host)] + argv,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=e,
        )
        self.buf = b""
        sandbox.nodes.append(self)
        self.port = self.addr = None
        self.first = self.read_line(60)
        if expect_ready:
            words = self.first.split()
            if not words or words[0] != "READY":
                raise NodeError(f"{name} on host {host} did not start: {self.first!r}; "
                                f"log: {self.stderr()}")
            self.port, self.addr = int(words[1]), int(words[2])

    def stderr(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def read_line(self, timeout):
        """The next protocol line; UCX's own log lines (it logs to stdout) go to the log."""
        while True:
            line = self._read_line(timeout)
            if not line.startswith("["):
                return line
            self.log.write(line.encode() + b"\n")
            self.log.flush()

    def _read_line(self, timeout):
        end = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise NodeError(f"{self.name}: no answer within {timeout} s; log: {self.stderr()}")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise NodeError(f"{self.name}: exited (rc {self.proc.poll()}); "
                                    f"log: {self.stderr()}")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def cmd(self, line, timeout=90):
        self.send(line)
        return self.read_line(timeout)

    def ok(self, line, timeout=90):
        r = self.cmd(line, timeout)
        if not r.startswith("OK"):
            raise NodeError(f"{self.name} on host {self.host}: '{line}' -> {r}")
        return r.split()[1:]

    def global_pid(self):
        """The agent process as this namespace sees it (the child of nsenter)."""
        p = self.proc.pid
        for _ in range(200):
            try:
                with open(f"/proc/{p}/task/{p}/children") as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
            except OSError:
                pass
            time.sleep(0.01)
        raise NodeError(f"{self.name}: cannot find its process")

    def kill(self):
        """SIGKILL of the agent process; returns time.monotonic() of the kill."""
        pid = self.global_pid()
        t = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        return t

    def quit(self, timeout=30):
        if self.proc.poll() is None:
            try:
                self.send("QUIT")
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.close()

    def close(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.global_pid(), signal.SIGKILL)
            except (OSError, NodeError):
                pass
            try:
                self.proc.kill()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.log.close()


class Sandbox:
    """N sandbox hosts; torn down by close() (also called by the watchdog on timeout)."""

    def __init__(self, n, tmp, env=None):
        self.dir = os.path.join(tmp, "sandbox")
        self.n = n
        self.nodes = []
        self.extra = []
        self.closed = False
        r = subprocess.run([SANDBOX, "up", self.dir, str(n)], capture_output=True, text=True,
                           env=dict(os.environ, SANDBOX_OWNER=str(os.getpid()), **(env or {})))
        if r.returncode == 77:
            pytest.skip(f"multi-host sandbox unavailable: {r.stderr.strip()}")
        if r.returncode != 0:
            subprocess.run([SANDBOX, "down", self.dir])
            raise RuntimeError(f"sandbox.sh up failed: {r.stderr}")
        self.addrs = r.stdout.split()

    def addr(self, i):
        return self.addrs[i]

    def node(self, host, kind, name, **kw):
        return Node(self, host, kind, name, **kw)

    def start(self, host, argv, log_name):
        """A helper process (etcd, iperf3) inside a host."""
        log = open(os.path.join(self.dir, log_name), "wb")
        p = subprocess.Popen([SANDBOX, "exec", self.dir, str(host)] + argv,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.extra.append((p, log))
        return p

    def run(self, host, argv, timeout=60):
        return subprocess.run([SANDBOX, "exec", self.dir, str(host)] + argv,
                              capture_output=True, text=True, timeout=timeout)

    def link(self, host, up):
        """Sets host's interface up or down; returns the time.monotonic() of the change."""
        t = time.monotonic()
        subprocess.run([SANDBOX, "link", self.dir, str(host), "up" if up else "down"], check=True)
        return t

    def destroy(self, host):
        """Kills every process of a host and removes its namespaces; returns the time of it."""
        t = time.monotonic()
        subprocess.run([SANDBOX, "destroy", self.dir, str(host)], check=True)
        return t

    def close(self):
        if self.closed:
            return
        self.closed = True
        for n in self.nodes:
            n.close()
        for p, log in self.extra:
            if p.poll() is None:
                p.kill()
        subprocess.run([SANDBOX, "down", self.dir])
        for p, log in self.extra:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
            log.close()

    def start_etcd(self, host, port=2379):
        """A real etcd on `host`, reachable from the other hosts; returns its client URL."""
        if not os.access(ETCD, os.X_OK):
            pytest.skip("etcd not found; install etcd-server (Debian) or set ETCD_BIN")
        a = self.addr(host)
        url = f"http://{a}:{port}"
        data = os.path.join(self.dir, f"etcd-{host}")
        self.start(host, [ETCD, "--name", "mh", "--data-dir", data,
                          "--listen-client-urls", url, "--advertise-client-urls", url,
                          "--listen-peer-urls", "http://127.0.0.1:2380",
                          "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                          "--initial-cluster", "mh=http://127.0.0.1:2380",
                          "--log-level", "error"], f"etcd-{host}.log")
        probe = ("exec 3<>/dev/tcp/{a}/{p} && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 "
                 "&& cat <&3").format(a=a, p=port)
        for _ in range(200):
            r = self.run(host, ["bash", "-c", probe], timeout=10)
            if '"health":"true"' in r.stdout:
                return url
            time.sleep(0.05)
        raise RuntimeError("etcd did not come up in the sandbox")


@pytest.fixture
def sandbox(request, tmp_path):
    """make(n, env=None) -> Sandbox with n hosts (env: sandbox.sh settings); everything is torn down after the test, also when it
    fails or overruns its time (NIXL_MH_TEST_TIMEOUT seconds, default 120)."""
    made = []
    limit = float(os.environ.get("NIXL_MH_TEST_TIMEOUT", "120"))
    fired = []

    def watchdog():
        fired.append(True)
        for s in made:
            s.close()

    timer = threading.Timer(limit, watchdog)
    timer.daemon = True
    timer.start()

    def make(n, env=None):
        s = Sandbox(n, tempfile.mkdtemp(dir=tmp_path), env)
        made.append(s)
        return s

    try:
        yield make
    finally:
        timer.cancel()
        for s in made:
            s.close()
    if fired:
        pytest.fail(f"test overran {limit} s; the sandbox was torn down")


def pytest_generate_tests(metafunc):
    if "kind" in metafunc.fixturenames:
        kinds = node_kinds()
        metafunc.parametrize("kind", kinds or [pytest.param("none", marks=pytest.mark.skip(
            reason="no node program built (NIXL_MH_NODE unset and no nixl Python module)"))])


# ---- scenarios shared by the backends' tests (test_data, test_etcd, test_failure,
# test_join_leave over UCX; test_libfabric over LIBFABRIC) ----------------------------------------

MIB = 1 << 20


def lf_env(interfaces="eth0", **extra):
    """A node's environment for the LIBFABRIC backend over tcp;ofi_rxm on `interfaces`."""
    env = {"NIXL_MH_BACKEND": "LIBFABRIC", "FI_PROVIDER": "tcp;ofi_rxm",
           "NIXL_LIBFABRIC_INTERFACES": interfaces}
    env.update(extra)
    return env

# (descriptor size, descriptor count): 4 KiB .. 64 MiB in one descriptor, and 1000 of 4 KiB
# and of 64 KiB.
POINTS = [(4096, 1), (MIB, 1), (64 * MIB, 1), (4096, 1000), (65536, 1000)]


def connect(x, y, sb):
    """x fetches y's metadata from y's listener (y listens on its host address)."""
    x.ok(f"FETCH {y.name} {sb.addr(y.host)} {y.port}")


def connect_all(sources, nodes, sb):
    """Every node of `sources` fetches every other node of `nodes`."""
    for x in sources:
        for y in nodes:
            if x is not y:
                connect(x, y, sb)


def move_points(ini, tgt):
    """WRITE then READ at every point of POINTS from `ini` to `tgt` (each of 64 MiB at least),
    each with a notification that the target sees only after the data; every byte checked."""
    seed = 1
    for op in ("WRITE", "READ"):
        for dsize, n in POINTS:
            seed += 1
            total = dsize * n
            src, dst = (ini, tgt) if op == "WRITE" else (tgt, ini)
            src.ok(f"FILL {seed}")
            dst.ok("ZERO")
            st = ini.ok(f"XFER {op} {tgt.name} {tgt.addr} {dsize} {n} n{seed}")
            assert st[0] == "NIXL_SUCCESS", f"{op} {dsize}x{n}: {st}"
            if op == "READ":
                ini.ok(f"CHECK {seed} 0 {total}")
            # the notification is there only after the data: the target checks at once
            tgt.ok(f"NOTIFCHECK {ini.name} n{seed} {seed} 0 {total} 10000")


def meet_through_etcd(nodes):
    """Three nodes publish to etcd and fetch each other; a WRITEs to b with a notification, c
    READs it back from b; then a unpublishes and the watch drops it on b and c."""
    for x in nodes:
        x.ok("ETCD_SEND")
    for x in nodes:
        for y in nodes:
            if x is not y:
                x.ok(f"ETCD_FETCH {y.name}")
    a, b, c = nodes
    a.ok("FILL 5")
    assert a.ok(f"XFER WRITE {b.name} {b.addr} {MIB} 4 via-etcd")[0] == "NIXL_SUCCESS"
    b.ok(f"NOTIFCHECK {a.name} via-etcd 5 0 {4 * MIB} 10000")
    assert c.ok(f"XFER READ {b.name} {b.addr} {MIB} 4")[0] == "NIXL_SUCCESS"
    c.ok(f"CHECK 5 0 {4 * MIB}")
    a.ok("ETCD_INVAL")
    for x in (b, c):
        x.ok(f"WAITMD {a.name} absent 5000")


def target_keeps_initiator_that_forgot_it(sb, s, t):
    """Initiator `s` writes to target `t` (which never loads `s`), then drops `t`'s metadata: it
    says bye, and `t`, waiting for longer than the silence that marks an end, does not take
    `s` for gone."""
    connect(s, t, sb)
    s.ok("FILL 5")
    assert s.ok(f"XFER WRITE {t.name} {t.addr} {MIB} 1 first")[0] == "NIXL_SUCCESS"
    assert t.ok(f"WAITREMOTE {s.name} first 10000")[0] == "DONE"
    assert t.ok(f"WAITREMOTE {s.name} kv 500")[0] == "PROC"  # watched by now
    s.ok(f"FORGET {t.name}")
    assert t.ok(f"WAITREMOTE {s.name} kv 3500")[0] == "PROC", t.stderr()


def target_learns_initiator_died(sb, s, t, target_loads):
    """Initiator `s` writes to target `t` (which loads `s`'s metadata when `target_loads`); `t`
    waits for the next transfer and `s` is SIGKILLed: the wait ends with ERR within 3 s."""
    connect(s, t, sb)
    if target_loads:
        connect(t, s, sb)
    s.ok("FILL 5")
    assert s.ok(f"XFER WRITE {t.name} {t.addr} {MIB} 1 first")[0] == "NIXL_SUCCESS"
    assert t.ok(f"WAITREMOTE {s.name} first 10000")[0] == "DONE"
    assert t.ok(f"WAITREMOTE {s.name} kv 200")[0] == "PROC"
    t_kill = s.kill()
    st, _ = t.ok(f"WAITREMOTE {s.name} kv 20000")
    took = time.monotonic() - t_kill
    assert st == "ERR", f"{st}; target's log: {t.stderr()}"
    assert took < 3.0, f"the target learnt it after {took:.2f} s"


def peer_dies_mid_transfer(sb, nodes, how, size):
    """Nodes a and b write `size` bytes to t in a loop, connected through their listeners; t is
    SIGKILLed (how="sigkill") or its host destroyed: each request ends with
    NIXL_ERR_REMOTE_DISCONNECT within 2 s, a and b still move data both ways, and a new request
    to t fails cleanly."""
    a, b, t = nodes
    connect_all((a, b), nodes, sb)
    for x in (a, b):
        x.ok(f"LOOP WRITE {t.name} {t.addr} {size}")
    for x in (a, b):  # both have moved data and are now in the middle of their writes
        end = time.monotonic() + 30
        while int(x.ok("LOOPCOUNT")[0]) < 2:
            assert time.monotonic() < end, f"{x.name}: no transfer completed in 30 s"
            time.sleep(0.01)
    t_kill = t.kill() if how == "sigkill" else sb.destroy(t.host)
    for x in (a, b):
        st, t_err_ns, count = x.ok("LOOPRESULT 10000")
        assert st == "NIXL_ERR_REMOTE_DISCONNECT", f"{x.name}: {st}"
        delay = int(t_err_ns) / 1e9 - t_kill
        assert delay < 2.0, f"{x.name} saw the failure after {delay:.2f} s"
        assert int(count) > 0, f"{x.name}: no transfer completed before the failure"
    # the live hosts still talk to each other, both ways
    for src, dst, seed in ((a, b, 11), (b, a, 12)):
        src.ok(f"FILL {seed}")
        st = src.ok(f"XFER WRITE {dst.name} {dst.addr} {MIB} 4 after-{seed}")
        assert st[0] == "NIXL_SUCCESS"
        dst.ok(f"NOTIFCHECK {src.name} after-{seed} {seed} 0 {4 * MIB} 10000")
    # a new request to the dead peer fails cleanly as well
    r = a.cmd(f"XFER WRITE {t.name} {t.addr} 4096 1")
    assert r.startswith("ERR") or "NIXL_ERR" in r, r


def restart_under_same_name(sb, others, r, leave, restart):
    """Every node of `others` (connected to r through the listeners) makes a request to r; r
    leaves (leave="graceful": it invalidates itself at their listeners and quits; "crash": it is
    SIGKILLed, and their request sees it) and `restart()` starts it again under its name. They
    load the new generation: the old request is refused with NIXL_ERR_NOT_FOUND, new ones work
    both ways."""
    for x in others:
        x.ok(f"MKREQ old WRITE {r.name} {r.addr} {MIB} 1")
    if leave == "graceful":
        for x in others:  # the leaving agent tells everybody
            r.ok(f"INVAL {sb.addr(x.host)} {x.port}")
        for x in others:
            x.ok(f"WAITMD {r.name} absent 10000")
        r.quit()
    else:
        r.kill()
        for x in others:  # the old request sees the death; the agent then drops the peer
            st = x.ok("POSTREQ old")[0]
            assert st in ("NIXL_ERR_REMOTE_DISCONNECT", "NIXL_ERR_NOT_FOUND"), st
            x.ok(f"WAITMD {r.name} absent 10000")
    r2 = restart()  # same host, name and port: the new generation
    r2.ok("FILL 99")
    for x in others:
        connect(x, r2, sb)
        connect(r2, x, sb)
    for x in others:
        st = x.ok("POSTREQ old")
        assert st[0] == "NIXL_ERR_NOT_FOUND", f"{x.name}: old-generation request gave {st}"
        x.ok("RELREQ old")
        assert x.ok(f"XFER READ {r2.name} {r2.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
        x.ok(f"CHECK 99 0 {MIB}")
    for x in others:  # after every READ: the WRITEs change r2's buffer
        x.ok(f"FILL {x.host + 50}")
        assert x.ok(f"XFER WRITE {r2.name} {r2.addr} {MIB} 1 hi{x.host}")[0] == "NIXL_SUCCESS"
        r2.ok(f"NOTIFCHECK {x.name} hi{x.host} {x.host + 50} 0 {MIB} 10000")
        # and the restarted agent reaches them
        assert r2.ok(f"XFER READ {x.name} {x.addr} {MIB} 1")[0] == "NIXL_SUCCESS"
    return r2
