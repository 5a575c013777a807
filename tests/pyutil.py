"""pyutil: what the Python tests share (the tests' own directory is on
sys.path when meson runs them): failure collection, small file helpers, and
starting and stopping a shmkv-loader."""
import os
import signal
import subprocess
import sys
import time

fails = []


def check(cond, msg):
    """Records msg as a failure unless cond; the test goes on."""
    if not cond:
        fails.append(msg)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


# Deadlines scale for a slow machine: times $SHMKV_TEST_SLOW (a factor,
# default 1; ./run test-loaded sets it). A wait for an event returns as soon
# as it happens, so the defaults are generous for a loaded 2-core box.
SLOW = max(1.0, float(os.environ.get('SHMKV_TEST_SLOW') or 1))


def wait_for(cond, seconds=60.0):
    """Polls cond every 50 ms until it is true or seconds (times SLOW) pass;
    its last value."""
    end = time.monotonic() + seconds * SLOW
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.05)


def start_loader(loader, root, args, log):
    """Starts shmkv-loader --root ROOT ARGS --foreground (stderr to log) and
    waits for its control socket."""
    proc = subprocess.Popen([loader, '--root', root] + list(args) + ['--foreground'],
                            stderr=log)
    check(wait_for(lambda: os.path.exists(os.path.join(root, 'control.sock'))),
          'the loader did not open its control socket within %g s' % (60 * SLOW))
    return proc


def stop_loader(proc):
    """SIGTERM; the loader must exit 0 within 60 s (times SLOW; else killed: a
    failure)."""
    if not proc:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60 * SLOW)
        check(rc == 0, f'the loader exited {rc} after SIGTERM')
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fails.append('the loader did not stop within 20 s of SIGTERM (killed)')


def finish(name):
    """Prints the failures and exits 1 if there were any."""
    for f in fails:
        print('FAIL:', f)
    print(f'{name}: {len(fails)} failures')
    sys.exit(1 if fails else 0)
