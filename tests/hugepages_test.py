#!/usr/bin/env python3
"""hugepages_test: shmctl hugepages plan and reserve against a fake host
($SHMKV_HOST_ROOT: sys/kernel/mm/hugepages, proc/meminfo, proc/mounts,
etc/sysctl.d), so that reserve's writes land in files this test reads back,
and plan once against the real host.
usage: hugepages_test.py SHMCTL SYSCTL_SNIPPET"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from pyutil import check, fails, finish, read, write

shmctl, snippet = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix='shmkv-hp-test.')
host = os.path.join(tmp, 'host')
hp = os.path.join(host, 'sys/kernel/mm/hugepages')


def pool(kb, total, free):
    d = os.path.join(hp, f'hugepages-{kb}kB')
    for name, v in (('nr_hugepages', total), ('free_hugepages', free),
                    ('resv_hugepages', 0), ('surplus_hugepages', 0)):
        write(os.path.join(d, name), f'{v}\n')


def run(*args, env_host=True):
    env = dict(os.environ)
    if env_host:
        env['SHMKV_HOST_ROOT'] = host
    else:
        env.pop('SHMKV_HOST_ROOT', None)
    r = subprocess.run([shmctl] + list(args), capture_output=True, text=True, env=env)
    return r.returncode, r.stdout, r.stderr


try:
    pool(2048, 0, 0)
    pool(1048576, 0, 0)
    write(os.path.join(host, 'proc/meminfo'), 'MemTotal: 1000 kB\nHugepagesize:       2048 kB\n')
    write(os.path.join(host, 'proc/mounts'),
          'proc /proc proc rw 0 0\nhugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n')
    sysctl = os.path.join(host, 'etc/sysctl.d/60-shmkv-hugepages.conf')
    os.makedirs(os.path.dirname(sysctl))
    shutil.copy(snippet, sysctl)

    # an image of a little over 3 MiB: 2 pages of 2M, 1 of 1G
    src = os.path.join(tmp, 'big.jsonl')
    write(src, json.dumps({'key': 'big', 'value': 'x' * (3 << 20)}) + '\n')
    img = os.path.join(tmp, 'big.shmkv')
    rc, out, err = run('image', 'build', '-o', img, src)
    check(rc == 0, f'image build: {rc} {err}')
    size = os.path.getsize(img)
    # --progress: progress lines on stderr though it is no terminal; none without
    rc, out, err = run('--progress', 'image', 'build', '-o', img + '.2', src)
    check(rc == 0 and 'reading: 100%' in err and err.count('\n') >= 3,
          f'--progress build: exit {rc}, stderr {err!r}')
    rc, out, err = run('image', 'build', '-o', img + '.2', src)
    check(rc == 0 and err == '', f'build without --progress on a pipe: stderr {err!r}')
    os.unlink(img + '.2')
    check(3 << 20 < size < 4 << 20, f'image size {size}')

    rc, out, err = run('-j', 'hugepages', 'plan', img)
    check(rc == 1, f'plan with empty pools: exit {rc}, want 1 (short): {err}')
    p = json.loads(out)
    by = {x['page_size']: x for x in p['pools']}
    check(by['2M']['pages_needed'] == 4 and by['1G']['pages_needed'] == 2,
          f'pages needed: {by}')
    check(by['2M']['short'] == 4 and by['2M']['mount'] == '/dev/hugepages' and
          by['2M']['default'], f'2M pool: {by["2M"]}')
    check(by['1G']['mount'] is None, f'1G pool has no mount: {by["1G"]}')
    check(p['enough'] is False and p['image_bytes'] == size, f'plan: {p}')

    rc, out, err = run('hugepages', 'plan', '--copies', '3', img, img)
    check(rc == 1 and '12' in out and 'hugepages reserve --page-size 2M --persist 12' in out,
          f'plain plan, 2 images x 3 copies: exit {rc}: {out}')

    pool(2048, 10, 10)
    rc, out, err = run('-j', 'hugepages', 'plan', img)
    check(rc == 0 and json.loads(out)['enough'], f'plan with 10 free 2M pages: {rc} {out}')

    # reserve from the images: the pool file, the sysctl.d line
    pool(2048, 0, 0)
    rc, out, err = run('-j', 'hugepages', 'reserve', '--persist', img)
    check(rc == 0, f'reserve: exit {rc}: {err}')
    r = json.loads(out) if out else {}
    check(r.get('requested') == 4 and r.get('total') == 4 and r.get('before') == 0 and
          r.get('mounted') is False and r.get('mount') == '/dev/hugepages', f'reserve: {r}')
    check(read(os.path.join(hp, 'hugepages-2048kB/nr_hugepages')).strip() == '4',
          'nr_hugepages not written')
    text = read(sysctl)
    lines = [ln for ln in text.splitlines() if 'vm.nr_hugepages' in ln and
             not ln.lstrip().startswith('#')]
    check(lines == ['vm.nr_hugepages = 4'], f'sysctl.d lines: {lines}')
    check(';vm.hugetlb_shm_group = 0' in text and text.startswith('# /etc/sysctl.d/'),
          'the snippet\'s other lines were not kept')
    check(not [f for f in os.listdir(os.path.dirname(sysctl)) if f.startswith('.')],
          'a temporary file was left in sysctl.d')

    # PAGES of another size: no sysctl for it, the kernel command line instead
    rc, out, err = run('hugepages', 'reserve', '--page-size', '1G', '--persist', '--no-mount', '7')
    check(rc == 0 and read(os.path.join(hp, 'hugepages-1048576kB/nr_hugepages')).strip() == '7',
          f'reserve 7 x 1G: exit {rc}: {err}')
    check('hugepagesz=1G hugepages=7' in err, f'no kernel command line advice: {err}')
    check('vm.nr_hugepages = 4' in read(sysctl), 'a 1G reserve changed vm.nr_hugepages')

    # progress (--progress: lines when stderr is no terminal): growing goes in
    # steps, from 0% to 100%; shrinking is one write, no progress
    pool(2048, 0, 0)
    rc, out, err = run('--progress', 'hugepages', 'reserve', '--no-mount', '200')
    lines = [ln for ln in err.splitlines() if ln.startswith('reserve:')]
    check(rc == 0 and lines and lines[0].split() == ['reserve:', '0%', '0/200'] and
          lines[-1].split() == ['reserve:', '100%', '200/200'],
          f'reserve --progress: exit {rc}: {err!r}')
    check(read(os.path.join(hp, 'hugepages-2048kB/nr_hugepages')).strip() == '200',
          'reserve 200: nr_hugepages')
    rc, out, err = run('--progress', 'hugepages', 'reserve', '--no-mount', '50')
    check(rc == 0 and 'reserve:' not in err and
          read(os.path.join(hp, 'hugepages-2048kB/nr_hugepages')).strip() == '50',
          f'shrink to 50: exit {rc}: {err!r}')
    rc, out, err = run('hugepages', 'reserve', '--no-mount', '60')
    check(rc == 0 and 'reserve:' not in err, f'no progress without a terminal: {err!r}')
    pool(2048, 4, 4)

    # --numa: a fake 2-node host, 2M pages per node (node 1 short)
    nodes = os.path.join(host, 'sys/devices/system/node')
    write(os.path.join(nodes, 'online'), '0-1\n')
    for n, (total, free) in enumerate(((6, 6), (1, 1))):
        write(os.path.join(nodes, f'node{n}/cpulist'), f'{n}\n')
        write(os.path.join(nodes, f'node{n}/distance'), '10 20\n' if n == 0 else '20 10\n')
        write(os.path.join(nodes, f'node{n}/meminfo'),
              f'Node {n} MemTotal: 1048576 kB\nNode {n} MemFree: 524288 kB\n')
        d = os.path.join(nodes, f'node{n}/hugepages/hugepages-2048kB')
        write(os.path.join(d, 'nr_hugepages'), f'{total}\n')
        write(os.path.join(d, 'free_hugepages'), f'{free}\n')
    # img is 2 pages of 2M (see above), 2 copies: node=0 needs 4 there
    rc, out, err = run('-j', 'hugepages', 'plan', '--numa', 'node=0', img)
    j = json.loads(out) if out else {}
    per = {x['node']: x for x in j.get('nodes', [])}
    check(rc == 0 and j.get('numa') == 'node=0' and per.get(0, {}).get('pages_needed') == 4 and
          per.get(1, {}).get('pages_needed') == 0 and j.get('enough') is True,
          f'plan --numa node=0: exit {rc}: {out} {err}')
    # replicate: 4 on each node; node 1 has 1 free: short by 3, exit 1;
    # interleave: a page of each copy on each node (2 + 2)
    rc, out, err = run('-j', 'hugepages', 'plan', '--numa', 'replicate', img)
    j = json.loads(out) if out else {}
    per = {x['node']: x for x in j.get('nodes', [])}
    check(rc == 1 and per.get(0, {}).get('short') == 0 and per.get(1, {}).get('short') == 3 and
          per.get(1, {}).get('pages_needed') == 4 and j.get('enough') is False,
          f'plan --numa replicate: exit {rc}: {out} {err}')
    rc, out, err = run('hugepages', 'plan', '--numa', 'interleave', img)
    check(rc == 1 and re.search(r'^0\s+2\s+6\s+6\s+0$', out, re.M) and
          re.search(r'^1\s+2\s+1\s+1\s+1$', out, re.M), f'plan interleave: {out}')
    rc, out, err = run('hugepages', 'plan', '--numa', 'replicate', img)
    check(rc == 1 and f'hugepages reserve --numa replicate --copies 2 {img}' in out,
          f'plan replicate, plain: {out}')
    # reserve --numa: each node's pool set to its part, with progress
    rc, out, err = run('--progress', '-j', 'hugepages', 'reserve', '--no-mount', '--numa',
                       'replicate', img)
    j = json.loads(out) if out else {}
    check(rc == 0 and j.get('ok') is True and
          [(x['node'], x['requested'], x['before'], x['total']) for x in j.get('nodes', [])] ==
          [(0, 4, 6, 4), (1, 4, 1, 4)] and 'reserve: 100% 3/3' in err,
          f'reserve --numa replicate: exit {rc}: {out} {err!r}')
    check(read(os.path.join(nodes, 'node1/hugepages/hugepages-2048kB/nr_hugepages')).strip() == '4'
          and read(os.path.join(nodes, 'node0/hugepages/hugepages-2048kB/nr_hugepages')).strip() == '4',
          'per-node nr_hugepages not written')
    for args, want in ((['hugepages', 'plan', '--numa', 'none', img], '--numa none'),
                       (['hugepages', 'plan', '--numa', 'node=7', img], 'node'),
                       (['hugepages', 'plan', '--numa', 'bogus', img], '--numa bogus'),
                       (['hugepages', 'reserve', '--numa', 'node=0', '--persist', img], 'per-node'),
                       (['hugepages', 'reserve', '--numa', 'node=0', '5'], 'IMAGE..., not PAGES')):
        rc, out, err = run(*args)
        check(rc == 2 and want in err, f'{" ".join(args)}: exit {rc}, stderr {err!r}')
    shutil.rmtree(nodes)
    pool(2048, 4, 4)

    # bad input: clear errors, exit 2, nothing written
    for args, want in (
            (['hugepages', 'plan', '/etc/hostname'], 'too short for a shmkv image header'),
            (['hugepages', 'plan', tmp], 'not a regular file (a directory)'),
            (['hugepages', 'plan', src], 'not a shmkv image'),
            (['hugepages', 'plan', os.path.join(tmp, 'nope')], 'No such file'),
            (['hugepages', 'plan'], 'expected IMAGE'),
            (['hugepages', 'plan', '--copies', '0', img], '--copies 0'),
            (['hugepages', 'plan', '--page-size', '2M', img], 'only for reserve'),
            (['hugepages', 'reserve', '--page-size', '3M', '5'], 'no 3M huge page pool'),
            (['hugepages', 'reserve', '--page-size', 'big', '5'], '--page-size big'),
    ):
        rc, out, err = run(*args)
        check(rc == 2 and want in err, f'{" ".join(args)}: exit {rc}, stderr {err!r}, want {want!r}')
    check(read(os.path.join(hp, 'hugepages-2048kB/nr_hugepages')).strip() == '4',
          'a failed command changed the pool')
    rc, out, err = run('-j', 'hugepages', 'plan', '/etc/hostname')
    check(rc == 2 and 'error' in json.loads(out), f'-j error: {out}')

    # a host without huge pages
    shutil.rmtree(hp)
    rc, out, err = run('hugepages', 'plan', img)
    check(rc == 2 and 'no huge page support' in err, f'no hugepages dir: {rc} {err}')

    # the real host: a plan, whatever its pools (0 enough, 1 short)
    rc, out, err = run('-j', 'hugepages', 'plan', img, env_host=False)
    if os.path.isdir('/sys/kernel/mm/hugepages'):
        check(rc in (0, 1) and json.loads(out)['pools'], f'real host plan: {rc} {err}')
finally:
    shutil.rmtree(tmp)

finish('hugepages_test')
