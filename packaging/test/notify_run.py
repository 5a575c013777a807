#!/usr/bin/env python3
"""notify_run.py - what systemd does for a Type=notify service, where systemd
is not PID 1: runs CMD with NOTIFY_SOCKET set and writes to LOG, one line
each, PID=<pid of CMD>, every notification it sends (READY=1, STATUS=...,
STOPPING=1), and EXIT=<status> once it exits (its exit code, or -SIGNAL).
Run it in the background and wait for READY=1 in LOG.
usage: notify_run.py LOG CMD..."""
import os
import socket
import subprocess
import sys
import tempfile

logpath, cmd = sys.argv[1], sys.argv[2:]
d = tempfile.mkdtemp(prefix='shmkv-notify.')
os.chmod(d, 0o755)
path = os.path.join(d, 'notify')
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o777)  # the service's user must be able to send
log = open(logpath, 'a', buffering=1)
p = subprocess.Popen(cmd, env=dict(os.environ, NOTIFY_SOCKET=path))
log.write(f'PID={p.pid}\n')
s.settimeout(0.1)


def drain(block):
    while True:
        try:
            msg = s.recv(4096)
        except (socket.timeout, BlockingIOError):
            return
        for line in msg.decode(errors='replace').split('\n'):
            if line:
                log.write(line + '\n')
        if not block:
            s.settimeout(0)


while p.poll() is None:
    drain(True)
s.settimeout(0)
drain(False)
log.write(f'EXIT={p.returncode}\n')
os.unlink(path)
os.rmdir(d)
