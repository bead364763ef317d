#!/usr/bin/env python3
"""Host side of the guest's command channel (test/interop/guest-agent).

vmchan.py SOCKET LOCKFILE TIMEOUT CMD: connects to the unix socket qemu serves for the
guest's ttyS1, sends CMD, prints what the guest answers and exits with the command's exit
status. The guest kills the command after TIMEOUT seconds (status 137); this side gives
up TIMEOUT + 20 seconds after sending (status 124). One client at a time: the socket
carries one conversation, so callers queue on LOCKFILE.
"""
import base64
import fcntl
import os
import socket
import sys
import time


def main():
    if len(sys.argv) != 5:
        sys.stderr.write("usage: vmchan.py SOCKET LOCKFILE TIMEOUT CMD\n")
        return 2
    sock_path, lock_path, timeout, cmd = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    lock = open(lock_path, "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    # qemu listens again shortly after the previous client left: retry for a bounded time.
    deadline = time.monotonic() + 10
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock_path)
            break
        except OSError as e:
            s.close()
            if time.monotonic() > deadline:
                sys.stderr.write("vmchan: cannot connect to %s: %s\n" % (sock_path, e))
                return 125
            time.sleep(0.1)
    cid = "%d-%d" % (os.getpid(), time.monotonic_ns())
    req = "SVI-CMD %s %d %s\n" % (cid, timeout, base64.b64encode(cmd.encode()).decode())
    s.sendall(req.encode())
    begin = ("SVI-BEGIN %s\n" % cid).encode()
    end = ("SVI-END %s " % cid).encode()
    deadline = time.monotonic() + timeout + 20
    buf = b""
    started = False
    out = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            sys.stderr.write("vmchan: no answer from the guest within %ds\n" % (timeout + 20))
            return 124
        s.settimeout(left)
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        if not data:
            sys.stderr.write("vmchan: the guest's channel closed\n")
            return 125
        buf += data
        # Lines are handled whole; a line of an earlier, abandoned request is skipped.
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            line += b"\n"
            if not started:
                started = line == begin
            elif line.startswith(end):
                # The agent ends the output with one newline of its own (see guest-agent).
                sys.stdout.buffer.write(out[:-1])
                sys.stdout.buffer.flush()
                return int(line[len(end):].strip() or b"125")
            else:
                out += line


if __name__ == "__main__":
    sys.exit(main())
