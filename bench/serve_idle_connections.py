#!/usr/bin/env python3
"""How many idle connections a new client of `vt serve` survives.

    python3 bench/serve_idle_connections.py PORT N PER_ADDRESS

Opens N half-open connections to a `vt serve` on 127.0.0.1:PORT, each with
half a request line and then silence, PER_ADDRESS of them from each
loopback address 127.0.1.1, 127.0.1.2, ... (the server caps connections per
client address); then a new client asks GET /health from 127.0.0.1 and the
line printed says whether it was served and how fast. Loopback only. Needs
N + a few descriptors (ulimit -n). The server closes the half-open ones
after its head timeout, so wait that long between runs.
"""
import socket
import sys
import time
import urllib.request


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    port, total, per_address = (int(a) for a in sys.argv[1:])
    held, refused = [], 0
    for i in range(total):
        s = socket.socket()
        s.bind(("127.0.1.%d" % (1 + i // per_address), 0))
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /hea")
        except OSError:
            refused += 1
        held.append(s)
    time.sleep(1)  # lets the server accept (or refuse) the last ones
    closed = 0
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    t0 = time.time()
    try:
        answer = urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=30).status
    except Exception as e:  # a refusal is the result being measured
        answer = repr(e)
    addresses = (total + per_address - 1) // per_address
    print("%d half-open connections from %d addresses (<= %d each); closed by the server: %d; "
          "new client GET /health: %s in %.3f s" % (total, addresses, per_address, closed + refused, answer,
                                                    time.time() - t0))
    for s in held:
        s.close()


if __name__ == "__main__":
    main()
