#!/usr/bin/env python3
"""cache_stats_test: shmctl cache stats against a real shmkv-loader: the
Prometheus text is well-formed (every sample's family has HELP and TYPE
first, names and labels valid, values numbers) and says what status says;
-j holds each cache's status; a loader that is down gives shmkv_up 0 and
exit 2; a missing cache exit 1. The metrics file (metrics_file) the loader
keeps: the same text, rewritten after each load and every metrics_interval,
by a rename (no temporary left), failures counted by reason, an unwritable
path reported (log, list) without stopping the loader, shmkv_up 0 at stop.
usage: cache_stats_test.py SHMCTL SHMKV_LOADER"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from pyutil import check, fails, finish, read, start_loader, stop_loader, wait_for

shmctl, loader = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix='shmkv-stats-test.')


def run(*args):
    r = subprocess.run([shmctl, '-r', os.path.join(tmp, 'root')] + list(args),
                       capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def parse_prom(text):
    """{(name, frozenset(labels)): value}; checks the exposition format."""
    samples, declared = {}, {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (-?[0-9.]+(e[+-]?[0-9]+)?)$')
    for ln in text.splitlines():
        if ln.startswith('# HELP ') or ln.startswith('# TYPE '):
            parts = ln.split(' ', 3)
            declared.setdefault(parts[2], set()).add(parts[1])
            continue
        m = line_re.match(ln)
        if not m:
            fails.append(f'prometheus: malformed line {ln!r}')
            continue
        name = m.group(1)
        if declared.get(name) != {'HELP', 'TYPE'}:
            fails.append(f'prometheus: {name} sampled before its HELP and TYPE')
        labels = frozenset(re.findall(r'([a-z_]+)="([^"]*)"', m.group(3) or ''))
        key = (name, labels)
        if key in samples:
            fails.append(f'prometheus: duplicate sample {key}')
        samples[key] = float(m.group(4))
    return samples


proc = None
try:
    root, spool, shm = (os.path.join(tmp, d) for d in ('root', 'spool', 'shm'))
    for d in (root, spool, shm):
        os.mkdir(d, 0o755)
    # down: shmkv_up 0
    rc, out, err = run('cache', 'stats', '--prometheus')
    check(rc == 2 and parse_prom(out) == {('shmkv_up', frozenset()): 0.0},
          f'loader down: exit {rc}, {out!r}')
    check('cannot connect' in err, f'loader down: {err}')

    promdir = os.path.join(tmp, 'prom')
    os.mkdir(promdir)
    prom = os.path.join(promdir, 'shmkv.prom')
    conf = os.path.join(tmp, 'loader.conf')

    def write_conf(path):
        with open(conf, 'w') as f:
            f.write(f'[loader]\nmetrics_file = {path}\nmetrics_interval = 1s\n')
    write_conf(prom)
    logpath = os.path.join(tmp, 'loader.log')
    log = open(logpath, 'w')
    proc = start_loader(loader, root, ['--config', conf, '--spool', spool, '--shm-dir', shm,
                                       '--memory', 'shm'], log)
    src = os.path.join(tmp, 'u.jsonl')
    with open(src, 'w') as f:
        for i in range(100):
            f.write(json.dumps({'key': f'k{i}', 'value': i}) + '\n')
    rc, out, err = run('image', 'build', '-o', os.path.join(tmp, 'u.shmkv'), src)
    check(rc == 0, f'build: {err}')
    os.rename(os.path.join(tmp, 'u.shmkv'), os.path.join(spool, 'users.shmkv'))
    with open(os.path.join(tmp, 'bad'), 'w') as f:
        f.write('junk\n')
    os.rename(os.path.join(tmp, 'bad'), os.path.join(spool, 'bad.shmkv'))
    wait_for(lambda: not os.path.exists(os.path.join(spool, 'users.shmkv')) and
             os.path.exists(os.path.join(spool, 'bad.shmkv.rejected')))
    wait_for(lambda: json.loads(run('-j', 'cache', 'status', 'users')[1] or '{}').get('published'))

    rc, out, err = run('-j', 'cache', 'status', 'users')
    status = json.loads(out)
    rc, out, err = run('cache', 'stats', '--prometheus')
    check(rc == 0, f'stats --prometheus: exit {rc}: {err}')
    s = parse_prom(out)
    u = frozenset({('cache', 'users')})
    b = frozenset({('cache', 'bad')})
    check(s.get(('shmkv_up', frozenset())) == 1 and s.get(('shmkv_caches', frozenset())) == 2,
          f'up/caches: {out}')
    check(s.get(('shmkv_cache_generation', u)) == status['generation'] >= 1, 'generation')
    check(s.get(('shmkv_cache_image_bytes', u)) == status['image_size'], 'image bytes')
    check(s.get(('shmkv_cache_entries', u)) == 100, 'entries')
    check(s.get(('shmkv_cache_memory_bytes', u | {('kind', 'shm')})) == status['map_size'],
          'memory bytes by kind')
    check(abs(s.get(('shmkv_cache_load_duration_seconds', u), -1) - status['load_ms'] / 1e3) < 1e-3,
          'load duration')
    check(s.get(('shmkv_cache_readers', u | {('generation', 'current')})) == status['readers'],
          'readers')
    check(s.get(('shmkv_cache_failed', b)) == 1 and s.get(('shmkv_cache_failed', u)) == 0,
          'failed')
    check(s.get(('shmkv_cache_last_load_failed', b)) == 1 and
          s.get(('shmkv_cache_last_load_failed', u)) == 0, 'last load failed')
    check(('shmkv_cache_memory_bytes', b | {('kind', 'shm')}) not in s,
          'memory of a cache with nothing published')

    # failure counters by reason: the junk file is not an image; a load of a
    # directory is the source's fault, and a flipped header byte a checksum
    reasons = ['source', 'io', 'changed', 'invalid_image', 'checksum', 'too_large',
               'no_room', 'out_of_memory', 'other']
    for r in reasons:
        check(s.get(('shmkv_cache_load_failures_total', u | {('reason', r)})) == 0,
              f'users failures {r}: {s.get(("shmkv_cache_load_failures_total", u | {("reason", r)}))}')
        check(s.get(('shmkv_cache_load_failures_total', b | {('reason', r)})) ==
              (1 if r == 'invalid_image' else 0), f'bad failures {r}')
    check(s.get(('shmkv_cache_loads_total', u)) == 1 and s.get(('shmkv_cache_loads_total', b)) == 0,
          'loads_total')
    os.mkdir(os.path.join(tmp, 'dir.shmkv'))
    rc, out, err = run('cache', 'load', 'users', os.path.join(tmp, 'dir.shmkv'))
    check(rc != 0 and 'not a regular file' in err, f'load of a directory: exit {rc} {err}')
    rc, out, err = run('image', 'build', '-o', os.path.join(tmp, 'c.shmkv'), src)
    with open(os.path.join(tmp, 'c.shmkv'), 'r+b') as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0xff]))
    rc, out, err = run('cache', 'load', 'users', os.path.join(tmp, 'c.shmkv'))
    check(rc != 0 and 'checksum' in err, f'load of a corrupt image: exit {rc} {err}')
    rc, out, err = run('-j', 'cache', 'status', 'users')
    st2 = json.loads(out) if rc == 0 else {}
    check(st2.get('loads') == 1 and st2.get('failures', {}).get('source') == 1 and
          st2.get('failures', {}).get('checksum') == 1 and
          sum(st2.get('failures', {}).values()) == 2 and
          st2.get('generation') == status['generation'], f'status counters: {out}')
    rc, out, err = run('cache', 'stats', '--prometheus')
    s = parse_prom(out)
    check(s.get(('shmkv_cache_load_failures_total', u | {('reason', 'source')})) == 1 and
          s.get(('shmkv_cache_load_failures_total', u | {('reason', 'checksum')})) == 1,
          'prometheus failures by reason after two failed loads')
    check(s.get(('shmkv_cache_last_load_failed', u)) == 1 and
          s.get(('shmkv_cache_generation', u)) == status['generation'],
          'the old generation serves after the failures')

    # memory per NUMA node: a load pinned to node 0 (every host has it) is
    # checked by move_pages, and its pages show on node 0
    run('image', 'build', '-o', os.path.join(tmp, 'p.shmkv'), src)
    rc, out, err = run('cache', 'load', '--numa', 'node=0', 'users', os.path.join(tmp, 'p.shmkv'))
    # qemu-user (the AArch64 tiers) has no set_mempolicy: refused there, as
    # the loader must; the x86 runs check the figures
    no_numa = rc != 0 and 'set_mempolicy' in err and 'Function not implemented' in err
    if no_numa:
        print('cache_stats_test: memory per node not checked: no set_mempolicy here '
              '(qemu-user)')
    check(rc == 0 or no_numa, f'load --numa node=0: exit {rc} {err}')
    if no_numa:  # the second generation all the same, for what follows
        run('cache', 'load', 'users', os.path.join(tmp, 'p.shmkv'))
    rc, out, err = run('-j', 'cache', 'status', 'users')
    st3 = json.loads(out) if rc == 0 else {}
    rc, out, err = run('cache', 'stats', '--prometheus')
    s = parse_prom(out)
    check(no_numa or (s.get(('shmkv_cache_memory_node_bytes', u | {('node', '0')})) ==
                      st3.get('map_size') and
                      not [k for k in s if k[0] == 'shmkv_cache_memory_node_bytes' and
                           ('node', '0') not in k[1] and ('cache', 'users') in k[1]] and
                      s.get(('shmkv_cache_copies', u)) == 1),
          f'memory per node: {[(k, v) for k, v in s.items() if "node" in k[0] or "copies" in k[0]]} '
          f'map_size {st3.get("map_size")}')
    check(s.get(('shmkv_cache_loads_total', u)) == 2, 'loads_total after the pinned load')

    # the metrics file: the same text, kept current by a rename
    def same_as_stats():
        # the file is rewritten every metrics_interval: until it says what stats says
        global out, ftext
        out = run('cache', 'stats', '--prometheus')[1]
        ftext = read(prom) if os.path.exists(prom) else ''
        return parse_prom(ftext) == parse_prom(out)
    out = ftext = ''
    check(wait_for(same_as_stats), f'metrics file differs from stats --prometheus:\n{ftext}\n{out}')
    check(os.listdir(promdir) == ['shmkv.prom'], f'temporaries left: {os.listdir(promdir)}')
    check(os.stat(prom).st_mode & 0o777 == 0o644, f'mode {oct(os.stat(prom).st_mode)}')
    m0 = os.stat(prom).st_mtime_ns
    check(wait_for(lambda: os.stat(prom).st_mtime_ns > m0),
          'metrics file not rewritten after metrics_interval')
    # unwritable path (a reload): reported, the loader goes on; back again
    write_conf(os.path.join(tmp, 'nodir', 'shmkv.prom'))
    proc.send_signal(signal.SIGHUP)
    lst = {}

    def listed(pred):
        global lst
        rc, out, err = run('-j', 'cache', 'list')
        lst = json.loads(out) if rc == 0 else {}
        return pred(lst.get('metrics') or {})
    wait_for(lambda: listed(lambda m: m.get('error')))
    check('nodir' in ((lst.get('metrics') or {}).get('error') or ''), f'list metrics: {lst}')
    with open(logpath) as f:
        check(sum('metrics file not written' in ln for ln in f) == 1,
              'the failure is logged once, not at every retry')
    write_conf(prom)
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: listed(lambda m: m.get('error') is None and m.get('file') == prom))
    check(lst.get('metrics') == {'file': prom, 'error': None}, f'list metrics again: {lst}')

    rc, out, err = run('-j', 'cache', 'stats', 'users')
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and [c['name'] for c in j.get('caches', [])] == ['users'] and
          j['caches'][0]['generation'] == st3.get('generation'), f'-j stats users: {out} {err}')
    rc, out, err = run('cache', 'stats')
    check(rc == 0 and re.search(r'^users\s+\d+', out, re.M) and 'bad' in out, f'plain: {out}')
    rc, out, err = run('cache', 'stats', 'nope')
    check(rc == 1 and 'no cache' in err, f'missing cache: exit {rc} {err}')
    rc, out, err = run('cache', 'stats', '../x')
    check(rc == 2, f'bad name: exit {rc} {err}')
    rc, out, err = run('-j', 'cache', 'stats', '--prometheus')
    check(rc == 2 and 'exclude' in out, f'-j with --prometheus: {rc} {out}')
    rc, out, err = run('cache', 'stats', '--prometheus', 'users')
    check(rc == 2 and 'no NAME' in err, f'--prometheus NAME: {rc} {err}')
    # bad metrics keys stop a start with FILE:LINE and the reason
    for line, want in (('metrics_interval = 0', 'metrics_interval "0"'),
                       ('metrics_interval = 2d', 'metrics_interval "2d"'),
                       ('metrics_file = relative.prom', 'metrics_file must be an absolute path')):
        bad = os.path.join(tmp, 'bad.conf')
        with open(bad, 'w') as f:
            f.write(f'[loader]\n{line}\n')
        r = subprocess.run([loader, '--config', bad, '--root', os.path.join(tmp, 'root2'),
                            '--spool', spool, '--foreground'], capture_output=True, text=True,
                           timeout=20)
        check(r.returncode != 0 and f'{bad}:2:' in r.stderr and want in r.stderr,
              f'config "{line}": exit {r.returncode}: {r.stderr}')
finally:
    if proc:
        stop_loader(proc)
        check(os.path.exists(prom) and parse_prom(read(prom)) == {('shmkv_up', frozenset()): 0.0},
              'metrics file at stop: shmkv_up 0')
    shutil.rmtree(tmp, ignore_errors=True)

finish('cache_stats_test')
