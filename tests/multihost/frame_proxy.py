"""Tools for the metadata-secret tests, run inside a sandbox host.

    frame_proxy.py record LADDR LPORT TADDR TPORT OUT   # relays one request and its reply
                                                        # between a client and a listener, and
                                                        # saves the request frame to OUT
    frame_proxy.py send TADDR TPORT IN [--flip N]       # sends the saved frame (byte N counted
                                                        # from the end flipped) and prints the
                                                        # reply: "<TYPE> <status> <message>"
"""

import socket
import struct
import sys

TYPES = {1: "LOAD", 2: "FETCH", 3: "INVALIDATE", 4: "ACK", 5: "ERROR", 6: "AUTH"}


def read_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed")
        b += c
    return b


def read_frame(s):
    h = read_exact(s, 8)
    (n,) = struct.unpack("<I", h[4:8])
    return h + read_exact(s, n)


def describe(f):
    t = TYPES.get(f[3], str(f[3]))
    if t == "ERROR":
        (st,) = struct.unpack("<i", f[8:12])
        return f"ERROR {st} {f[12:].decode(errors='replace')}"
    return t


def main():
    if sys.argv[1] == "record":
        laddr, lport, taddr, tport, out = sys.argv[2:7]
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((laddr, int(lport)))
        ls.listen()
        print("listening", flush=True)
        c, _ = ls.accept()
        req = read_frame(c)
        with open(out, "wb") as f:
            f.write(req)
        t = socket.create_connection((taddr, int(tport)), timeout=10)
        t.sendall(req)
        rep = read_frame(t)
        c.sendall(rep)
        c.close()
        t.close()
        print("relayed", describe(req), "->", describe(rep), flush=True)
    elif sys.argv[1] == "send":
        taddr, tport, path = sys.argv[2:5]
        with open(path, "rb") as f:
            req = bytearray(f.read())
        if len(sys.argv) > 6 and sys.argv[5] == "--flip":
            req[-int(sys.argv[6])] ^= 0x01
        t = socket.create_connection((taddr, int(tport)), timeout=10)
        t.sendall(bytes(req))
        print(describe(read_frame(t)), flush=True)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
