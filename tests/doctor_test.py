#!/usr/bin/env python3
"""doctor_test: shmctl doctor against a fake host ($SHMKV_HOST_ROOT: huge
page pools, mounts, io_uring_disabled) and a real shmkv-loader: each planted
problem is found with its fix, the exit code is 1 exactly when a check
fails, and only what stops the loader serving fails (a serving loader
without the group shmkv exits 0 with a warning); -j and plain agree.
usage: doctor_test.py SHMCTL SHMKV_LOADER"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from pyutil import check, fails, finish, read, start_loader, stop_loader, wait_for, write

shmctl, loader = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix='shmkv-doctor-test.')
host = os.path.join(tmp, 'host')


def with_group_file(group_file):
    """The command prefix that runs a program with group_file as /etc/group
    (a private mount namespace: unshare -m as root, unshare -rm otherwise),
    or None where that cannot be done here (then the caller skips, saying so)."""
    if not shutil.which('unshare'):
        return None
    pre = ['unshare', '-m'] if os.geteuid() == 0 else ['unshare', '-r', '-m']
    pre += ['sh', '-c', 'mount --bind "$0" /etc/group && exec "$@"', group_file]
    if subprocess.run(pre + ['true'], capture_output=True).returncode != 0:
        return None
    return pre


def doctor(root, *extra, prefix=()):
    env = dict(os.environ, SHMKV_HOST_ROOT=host)
    r = subprocess.run(list(prefix) + [shmctl, '-j', 'doctor', '-r', root] + list(extra),
                       capture_output=True, text=True, env=env)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = {}
        fails.append(f'doctor -j: not JSON: {r.stdout!r} {r.stderr!r}')
    p = subprocess.run(list(prefix) + [shmctl, 'doctor', '-r', root], capture_output=True,
                       text=True, env=env)
    check(p.returncode == r.returncode, f'plain exit {p.returncode} != -j exit {r.returncode}')
    return r.returncode, out, p.stdout


def find(out, check_name, level=None, contains=''):
    return [f for f in out.get('findings', []) if f['check'] == check_name and
            (level is None or f['level'] == level) and contains in f['what']]


proc = None
try:
    d = os.path.join(host, 'sys/kernel/mm/hugepages/hugepages-2048kB')
    for name, v in (('nr_hugepages', 4), ('free_hugepages', 4)):
        write(os.path.join(d, name), f'{v}\n')
    write(os.path.join(host, 'proc/meminfo'), 'Hugepagesize:       2048 kB\n')
    write(os.path.join(host, 'proc/mounts'), 'proc /proc proc rw 0 0\n')
    write(os.path.join(host, 'proc/sys/kernel/io_uring_disabled'), '2\n')

    # 1. no loader, pages without a mount, io_uring off, no tracefs/bpffs
    root = os.path.join(tmp, 'root')
    os.mkdir(root, 0o755)
    rc, out, plain = doctor(root)
    check(rc == 1 and out.get('ok') is False, f'planted failures: exit {rc}, ok {out.get("ok")}')
    # reserved pages without a mount: the loader loads into shm all the same
    f = find(out, 'hugepages', 'warn', 'no hugetlbfs mount')
    check(f and 'mount -t hugetlbfs -o pagesize=2M' in (f[0]['fix'] or ''), f'hugepages: {out}')
    f = find(out, 'loader', 'fail', 'cannot connect')
    check(f and 'systemctl start shmkv-loader' in (f[0]['fix'] or '') and
          f'shmkv-loader --root {root} --spool DIR' in (f[0]['fix'] or ''), f'loader: {f}')
    f = find(out, 'io_uring', 'warn', 'io_uring_disabled = 2')
    check(f and f[0]['fix'].startswith('sysctl -w kernel.io_uring_disabled=0'), f'io_uring: {f}')
    f = find(out, 'tracefs', 'warn')
    check(f and f[0]['fix'] == 'mount -t tracefs tracefs /sys/kernel/tracing', f'tracefs: {f}')
    check(find(out, 'bpf', 'warn'), 'bpffs not reported missing')
    check(out.get('failures') == len([x for x in out['findings'] if x['level'] == 'fail']),
          'failures count')
    check('fix: mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=2M' in plain and 'failure' in plain, f'plain output: {plain}')
    check([x['check'] for x in out.get('findings', []) if x['level'] == 'fail'] == ['loader'],
          f'only the loader that does not answer fails: {out}')

    # NUMA: one node (no node tree: the CPUs of cpu/online), then two nodes
    # whose node 1 has no free huge pages while node 0 has
    write(os.path.join(host, 'sys/devices/system/cpu/online'), '0-1\n')
    rc, out, plain = doctor(root)
    check(find(out, 'numa', 'ok', '1 NUMA node'), f'numa, one node: {find(out, "numa")}')
    nodes = os.path.join(host, 'sys/devices/system/node')
    write(os.path.join(nodes, 'online'), '0-1\n')
    for n, free in ((0, 4), (1, 0)):
        write(os.path.join(nodes, f'node{n}/cpulist'), f'{n}\n')
        write(os.path.join(nodes, f'node{n}/distance'), '10 20\n' if n == 0 else '20 10\n')
        d = os.path.join(nodes, f'node{n}/hugepages/hugepages-2048kB')
        write(os.path.join(d, 'nr_hugepages'), f'{free}\n')
        write(os.path.join(d, 'free_hugepages'), f'{free}\n')
    rc, out, plain = doctor(root)
    check(find(out, 'numa', 'info', '2 NUMA nodes (0-1)'), f'numa, two nodes: {find(out, "numa")}')
    f = find(out, 'numa', 'warn', 'node 1 has no free 2048 kB huge pages')
    check(f and 'hugepages reserve --numa replicate' in (f[0]['fix'] or ''),
          f'numa, node 1 without pages: {find(out, "numa")}')
    check(not find(out, 'numa', 'warn', 'node 0'), 'node 0 has pages: no warning for it')

    # 2. a root writable by every user
    os.chmod(root, 0o777)
    rc, out, _ = doctor(root)
    f = find(out, 'root', 'fail', 'writable by every user')
    check(f and f[0]['fix'] == f'chmod o-w {root}', f'world-writable root: {f}')
    os.chmod(root, 0o755)

    # 3. the pages mounted, io_uring allowed, tracefs and bpffs there: those are ok
    write(os.path.join(host, 'proc/mounts'),
          'hugetlbfs /dev/hugepages hugetlbfs rw,pagesize=2M 0 0\n'
          'tracefs /sys/kernel/tracing tracefs rw 0 0\nbpf /sys/fs/bpf bpf rw 0 0\n')
    write(os.path.join(host, 'proc/sys/kernel/io_uring_disabled'), '0\n')
    rc, out, _ = doctor(root)
    check(find(out, 'hugepages', 'ok', 'mounted on /dev/hugepages'), f'hugepages ok: {out}')
    check(not find(out, 'io_uring', contains='io_uring_disabled'), 'io_uring_disabled=0 reported')
    check(find(out, 'tracefs', 'ok') and find(out, 'bpf', 'ok'), 'tracefs/bpf ok')

    # 4. a running loader, and a cache whose only load failed
    spool = os.path.join(tmp, 'spool')
    shm = os.path.join(tmp, 'shm')
    os.mkdir(spool, 0o755)
    os.mkdir(shm, 0o755)
    log = open(os.path.join(tmp, 'loader.log'), 'w')
    proc = start_loader(loader, root, ['--spool', spool, '--shm-dir', shm, '--memory', 'shm'],
                        log)

    # 4a. a source build's first hour: a serving loader on a host without
    # the group shmkv is healthy (exit 0), the group a warning with its fix;
    # with the group there, it is ok
    groups = [ln for ln in read('/etc/group').splitlines() if not ln.startswith('shmkv:')]
    write(os.path.join(tmp, 'group.without'), '\n'.join(groups) + '\n')
    write(os.path.join(tmp, 'group.with'), '\n'.join(groups + ['shmkv:x:64999:'] ) + '\n')
    without = with_group_file(os.path.join(tmp, 'group.without'))
    if without is None:
        print('doctor_test: SKIP the group checks: cannot bind-mount /etc/group '
              '(unshare -m, or -rm as a user, is not permitted here)')
    else:
        rc, out, plain = doctor(root, prefix=without)
        f = find(out, 'group', 'warn', 'no group shmkv')
        check(f and (f[0]['fix'] or '').startswith('groupadd --system shmkv'),
              f'no group shmkv: {find(out, "group")}')
        check(rc == 0 and out.get('ok') is True and out.get('failures') == 0,
              f'a serving loader without the group: exit {rc}, {out}')
        check('fix: groupadd --system shmkv' in plain and '0 failures' in plain,
              f'plain output without the group: {plain}')
        rc, out, _ = doctor(root, prefix=with_group_file(os.path.join(tmp, 'group.with')))
        check(find(out, 'group', 'ok', 'group shmkv (gid 64999)'),
              f'group shmkv there: {find(out, "group")}')
    write(os.path.join(tmp, 'bad.tmp'), 'not an image\n' * 500)
    os.rename(os.path.join(tmp, 'bad.tmp'), os.path.join(spool, 'bad.shmkv'))
    wait_for(lambda: os.path.exists(os.path.join(spool, 'bad.shmkv.rejected')))
    # a segment directory of another user on a (fake) hugetlbfs mount: the
    # loader would refuse it (root can plant one: chown)
    huge = os.path.join(tmp, 'huge')
    os.makedirs(os.path.join(huge, 'shmkv'))
    planted = os.geteuid() == 0
    if planted:
        os.chown(os.path.join(huge, 'shmkv'), 65534, 65534)
        with open(os.path.join(host, 'proc/mounts'), 'a') as f:
            f.write(f'hugetlbfs {huge} hugetlbfs rw,pagesize=2M 0 0\n')
    rc, out, _ = doctor(root)
    if planted:
        f = find(out, 'segments', 'warn', f'{huge}/shmkv is owned by uid 65534, not by the '
                 f'loader\'s uid {os.geteuid()}')
        check(f and f'rm -r {huge}/shmkv' in (f[0]['fix'] or ''), f'foreign segment dir: {find(out, "segments")}')
    check(find(out, 'loader', 'ok', f'pid {proc.pid}'), f'loader ok: {find(out, "loader")}')
    check(find(out, 'spool', 'ok'), f'spool ok: {find(out, "spool")}')
    f = find(out, 'cache', 'fail', 'cache bad')
    check(f and f[0]['fix'] == 'shmctl cache status bad', f'failed cache: {find(out, "cache")}')
    check(rc == 1, f'a failed cache: exit {rc}')
    check(rc == (1 if out.get('failures') else 0), 'exit code disagrees with failures')

    # usage
    r = subprocess.run([shmctl, 'doctor', 'check', 'extra'], capture_output=True, text=True)
    check(r.returncode == 2 and 'unexpected argument' in r.stderr, f'usage: {r.returncode} {r.stderr}')
finally:
    stop_loader(proc)
    shutil.rmtree(tmp, ignore_errors=True)

finish('doctor_test')
