#!/usr/bin/env python3
"""readme_ops_test: the operator's commands of the top README.md, run as
written. Every ```sh block of its sections "Build an image" and "Serve it
from shared memory" runs, in order, in one bash (set -euo pipefail) from a
tree laid out as the README assumes (build/shmctl/shmctl,
build/loader/shmkv-loader, lib/examples/users.jsonl), with a scratch
$TMPDIR: the image commands, a loader started on a scratch root, the cache
verbs, the drop and the loader's stop. So the README's commands cannot
drift from what the programs do. Afterwards the loader has exited and left
nothing of its cache behind.
usage: readme_ops_test.py SOURCE_ROOT SHMCTL SHMKV_LOADER"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

from pyutil import SLOW, check, fails, finish, read, wait_for

src, shmctl, loader = sys.argv[1], sys.argv[2], sys.argv[3]
SECTIONS = ('Build an image', 'Serve it from shared memory')


def blocks(readme):
    """The ```sh blocks of SECTIONS, in the README's order."""
    out = []
    for part in re.split(r'^## ', readme, flags=re.M)[1:]:
        title = part.split('\n', 1)[0].strip()
        if title in SECTIONS:
            out += re.findall(r'^```sh\n(.*?)^```', part, flags=re.M | re.S)
    return out


def loader_pids(tmp):
    """The pids in the lock files of roots under tmp (a loader the script
    started and did not stop)."""
    pids = []
    for lock in glob.glob(os.path.join(tmp, '**', 'loader.lock'), recursive=True):
        try:
            pids.append(int(read(lock).split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return pids


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is gone for our purposes
    try:
        return read(f'/proc/{pid}/stat').split(')')[-1].split()[0] != 'Z'
    except OSError:
        return False


tmp = tempfile.mkdtemp(prefix='shmkv-readme-ops-test.')
try:
    code = blocks(read(os.path.join(src, 'README.md')))
    script = '\n'.join(code)
    # the README must still show the operator's whole first hour: a test of
    # nothing would pass
    for what, pattern in (('an image build', r'^shmctl image build '),
                          ('a loader start', r'^shmkv-loader --root \$SHMKV_ROOT '),
                          ('a scratch root', r'^export SHMKV_ROOT='),
                          ('a cache get', r'^shmctl cache get '),
                          ('a cache drop', r'^shmctl cache drop '),
                          ('the loader stopped', r'^kill ')):
        check(re.search(pattern, script, flags=re.M), f'README.md: no {what} in the sections '
              f'{SECTIONS} (pattern {pattern!r})')
    tree = os.path.join(tmp, 'tree')
    for d in ('build/shmctl', 'build/loader', 'lib/examples', 'scratch'):
        os.makedirs(os.path.join(tree, d))
    os.symlink(os.path.abspath(shmctl), os.path.join(tree, 'build/shmctl/shmctl'))
    os.symlink(os.path.abspath(loader), os.path.join(tree, 'build/loader/shmkv-loader'))
    shutil.copy(os.path.join(src, 'lib/examples/users.jsonl'), os.path.join(tree, 'lib/examples'))
    scratch = os.path.join(tree, 'scratch')
    env = {k: v for k, v in os.environ.items() if k != 'SHMKV_ROOT'}
    env['TMPDIR'] = scratch
    logpath = os.path.join(tmp, 'script.log')
    # files, not pipes: the loader detaches and keeps its stderr open
    with open(logpath, 'w') as log:
        try:
            rc = subprocess.run(['bash', '-c', 'set -euxo pipefail\n' + script], cwd=tree,
                                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                timeout=180 * SLOW).returncode
        except subprocess.TimeoutExpired:
            rc = 'timed out'
    out = read(logpath)
    check(rc == 0, f'the README\'s commands failed (exit {rc}); their output:\n{out}')
    check(out.count('Ada Lovelace') >= 2, f'image get and cache get did not print the name:\n{out}')
    pids = loader_pids(scratch)
    check(len(pids) == 1, f'one loader was started: lock files give {pids}')
    for pid in pids:
        check(wait_for(lambda: not alive(pid)), f'the loader (pid {pid}) still runs after the '
              'README stopped it')
    ctl = glob.glob(os.path.join(scratch, '*', 'root', '*.ctl'))
    check(not ctl, f'control segments left after the drop: {ctl}')
finally:
    # a loader the README's commands left running (they failed): its cache
    # dropped, then stopped, so that nothing stays in /dev/shm
    for lock in glob.glob(os.path.join(tmp, '**', 'loader.lock'), recursive=True):
        for pid in loader_pids(os.path.dirname(lock)):
            if not alive(pid):
                continue
            fails.append(f'the README left its loader (pid {pid}) running: stopped it')
            subprocess.run([shmctl, '-r', os.path.dirname(lock), 'cache', 'drop', 'users'],
                           capture_output=True, timeout=60 * SLOW)
            os.kill(pid, signal.SIGTERM)
            if not wait_for(lambda: not alive(pid)):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(tmp, ignore_errors=True)

finish('readme_ops_test')
