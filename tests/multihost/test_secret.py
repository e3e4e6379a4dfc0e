"""Authenticated metadata across hosts: with a shared secret the listener accepts only frames
carrying a valid HMAC over the frame, a fresh nonce and a timestamp. A wrong or missing secret
is refused with a clear error on both sides and logged; a replayed frame and a tampered frame
are refused."""

import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "frame_proxy.py")
SECRET = "s3cret-of-the-cluster"


def refused(node, reply, words):
    """The request failed and its message (C++: the reply; Python: the log) says why."""
    assert reply.startswith("ERR"), reply
    text = reply + node.stderr()
    for w in words:
        assert w in text, f"'{w}' not in: {text[-2000:]}"


def test_secret_across_hosts(sandbox, kind):
    sb = sandbox(3)
    a1 = sb.addr(1)
    tgt = sb.node(1, kind, "mh-t", listen=True, listen_address=a1, secret=SECRET)
    good = sb.node(0, kind, "mh-good", listen=True, listen_address=sb.addr(0),
                   env={"NIXL_METADATA_SECRET": SECRET})
    good.ok(f"FETCH mh-t {a1} {tgt.port}")
    good.ok(f"SEND {a1} {tgt.port}")
    tgt.ok("WAITMD mh-good present 10000")
    # and the other way: the target fetches from a listener that has the secret by environment
    tgt.ok(f"FETCH mh-good {sb.addr(0)} {good.port}")

    wrong = sb.node(2, kind, "mh-wrong", secret="another-secret")
    refused(wrong, wrong.cmd(f"FETCH mh-t {a1} {tgt.port} 3000"), ["HMAC does not verify"])
    none = sb.node(2, kind, "mh-none")
    refused(none, none.cmd(f"FETCH mh-t {a1} {tgt.port} 3000"),
            ["accepts only authenticated", "metadata_secret"])
    # refusals are logged by the listener
    log = tgt.stderr()
    assert log.count("refused a request") >= 2, log[-2000:]
    # a secret on the client only: the plain listener says so
    plain = sb.node(2, kind, "mh-plain", listen=True, listen_address=sb.addr(2))
    refused(good, good.cmd(f"FETCH mh-plain {sb.addr(2)} {plain.port} 3000"),
            ["has no metadata_secret"])
    assert tgt.ok("HASMD mh-none")[0] == "no" and tgt.ok("HASMD mh-wrong")[0] == "no"

    # record an INVALIDATE from mh-good through a relay on host 0, then replay it
    frame = os.path.join(sb.dir, "invalidate.frame")
    relay = sb.start(0, ["/usr/bin/python3", PROXY, "record", sb.addr(0), "9100", a1,
                         str(tgt.port), frame], "relay.log")
    time.sleep(0.5)
    good.ok(f"INVAL {sb.addr(0)} 9100")
    relay.wait(20)
    tgt.ok("WAITMD mh-good absent 10000")
    good.ok(f"SEND {a1} {tgt.port}")
    tgt.ok("WAITMD mh-good present 10000")
    r = sb.run(2, ["/usr/bin/python3", PROXY, "send", a1, str(tgt.port), frame])
    assert r.stdout.startswith("ERROR") and "replayed" in r.stdout, r
    r = sb.run(2, ["/usr/bin/python3", PROXY, "send", a1, str(tgt.port), frame, "--flip", "1"])
    assert r.stdout.startswith("ERROR") and "HMAC does not verify" in r.stdout, r
    assert tgt.ok("HASMD mh-good")[0] == "yes", "a replayed or tampered INVALIDATE was obeyed"
    assert "replayed" in tgt.stderr()
