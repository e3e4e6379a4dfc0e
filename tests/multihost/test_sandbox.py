"""The test bed itself: sandbox hosts are separate (hostname, PID, IPC, network, /dev/shm),
reach each other, and reach nothing else."""

import os
import subprocess


def ns(sb, host, which):
    return sb.run(host, ["readlink", f"/proc/self/ns/{which}"]).stdout.strip()


def test_hosts_are_separate(sandbox):
    sb = sandbox(3)
    names = {sb.run(h, ["hostname"]).stdout.strip() for h in range(3)}
    assert len(names) == 3 and os.uname().nodename not in names
    for which in ("net", "ipc", "pid", "uts", "mnt"):
        ids = {ns(sb, h, which) for h in range(3)}
        ids.add(os.readlink(f"/proc/self/ns/{which}"))
        assert len(ids) == 4, f"{which} namespaces shared: {ids}"
    # each host's PID space starts at its own init
    assert sb.run(1, ["cat", "/proc/1/comm"]).stdout.strip() == "sleep"
    # /dev/shm is private
    sb.run(0, ["sh", "-c", "echo x > /dev/shm/mh-probe"])
    assert sb.run(1, ["test", "-e", "/dev/shm/mh-probe"]).returncode != 0
    assert not os.path.exists("/dev/shm/mh-probe")
    # no default route, no way out; the neighbours are reachable
    for h in range(3):
        routes = sb.run(h, ["ip", "route", "show"]).stdout
        assert "default" not in routes, routes
        assert sb.run(h, ["ip", "route", "get", "192.0.2.1"]).returncode != 0
    srv = sb.start(2, ["/usr/bin/python3", "-c",
                       "import socket; s=socket.socket(); s.bind(('%s', 9000)); s.listen(); "
                       "c,_=s.accept(); c.sendall(b'hello'); c.close()" % sb.addr(2)], "srv.log")
    probe = f"for i in $(seq 50); do exec 3<>/dev/tcp/{sb.addr(2)}/9000 && cat <&3 && exit 0; sleep 0.1; done; exit 1"
    r = sb.run(0, ["bash", "-c", probe])
    assert r.stdout == "hello", r
    srv.wait(10)
    # the root namespace holds none of the sandbox's interfaces
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "10.77.0." not in subprocess.run(["ip", "-o", "addr"], capture_output=True,
                                            text=True).stdout
    assert " h0@" not in links and "br0" not in links
