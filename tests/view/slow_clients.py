# slow_clients.py PORT N LINES: N connections to 127.0.0.1:PORT that each send a request line,
# then one header line a second, up to LINES lines, never ending the header (a client that
# trickles, the slowloris attack). Prints "connected N" once all are open (the test then asks
# the server something), and at the end "closed K of N by the server": the connections the
# server shut before their LINES lines were sent. Exits after LINES seconds at most.
import socket
import sys
import time

port, n, lines = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /api/summary HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
    socks.append(s)
print("connected", n, flush=True)
closed = set()


def shut_by_server(s):
    """True when the server has closed s or answered (a read that does not wait finds EOF,
    a reset or bytes)."""
    s.setblocking(False)
    try:
        s.recv(4096)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


for line in range(lines):
    time.sleep(1)
    for i, s in enumerate(socks):
        if i in closed:
            continue
        if shut_by_server(s):
            closed.add(i)
            continue
        try:
            s.sendall(b"X-Slow-%d: %d\r\n" % (i, line))
        except OSError:
            closed.add(i)
    if len(closed) == n:
        break
print("closed", len(closed), "of", n, "by the server", flush=True)
