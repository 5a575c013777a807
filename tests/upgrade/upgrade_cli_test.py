#!/usr/bin/python3
"""upgrade_cli_test: `shmctl image upgrade OLD -o NEW`, and what the other
image verbs say of a format 1 file.
  1. tests/upgrade/geo_v1.shmkv (format 1, built before format 1 was retired
     from geo_records.py's records) upgrades to the bytes of
     `geo_records.py | shmctl image build -o X -` (its shmkv_meta line
     carries the name, seed and created time); with -o - (the image on
     stdout, the summary on stderr), -j (the summary as JSON), and under
     --memory-limit 2M --threads 1 --tmpdir DIR (spilled; DIR left empty):
     the same bytes. The result verifies and dumps with "format": 2.
  2. Refusals, exit 2, no output left: a format 2 input ("already format
     2"), a truncated one, two inputs, no -o, -j with -o -, the input as the
     output (left as it was).
  3. image inspect, dump, get and verify of a format 1 file name the
     upgrade command; image build --format 1 does too, --format 2 is no
     option any more.
usage: upgrade_cli_test.py SHMCTL TESTS_UPGRADE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from pyutil import check, finish  # noqa: E402 (tests/pyutil.py)

shmctl, here = sys.argv[1], sys.argv[2]
GEO_V1 = os.path.join(here, 'geo_v1.shmkv')
ADVICE = "image format version 1 is retired: convert it with 'shmctl image upgrade OLD -o NEW'"
tmp = tempfile.mkdtemp(prefix='shmkv-upgrade-test.')


def run(*args, **kw):
    return subprocess.run([shmctl] + [str(a) for a in args], capture_output=True, **kw)


def path(name):
    return os.path.join(tmp, name)


def data(name):
    with open(name, 'rb') as f:
        return f.read()


try:
    # 1. the geonames-like image: a fresh build of its records, byte for byte
    records = subprocess.run([sys.executable, os.path.join(here, 'geo_records.py')],
                             capture_output=True, check=True).stdout
    r = run('image', 'build', '-o', path('fresh.shmkv'), '-', input=records)
    check(r.returncode == 0, 'build of geo_records.py: %s' % r.stderr)
    r = run('image', 'upgrade', '-o', path('up.shmkv'), GEO_V1, text=True)
    check(r.returncode == 0, 'upgrade: exit %d: %s' % (r.returncode, r.stderr))
    check(r.stdout.startswith('wrote %s: 9705 entries' % path('up.shmkv')),
          'upgrade summary: %s' % r.stdout)
    check(data(path('up.shmkv')) == data(path('fresh.shmkv')),
          'the upgraded image is not the fresh build of its records')
    r = run('image', 'upgrade', '-o', '-', GEO_V1)
    check(r.returncode == 0 and r.stdout == data(path('fresh.shmkv')),
          '-o -: exit %d, %d bytes on stdout' % (r.returncode, len(r.stdout)))
    check(b'wrote standard output: 9705 entries' in r.stderr, '-o -: summary %s' % r.stderr)
    spill = path('spill')
    os.mkdir(spill)
    r = run('-j', '--progress', 'image', 'upgrade', '--memory-limit', '2M', '--threads', '1',
            '--tmpdir', spill, '-o', path('up2.shmkv'), GEO_V1, text=True)
    check(r.returncode == 0, 'upgrade under a limit: %s' % r.stderr)
    check('\nsorting: ' in '\n' + r.stderr, 'under a limit: did not spill: %s' % r.stderr[-300:])
    if r.returncode == 0:
        st = json.loads(r.stdout)
        check(st['entries'] == 9705 and st['records'] == 9705 and
              st['output'] == path('up2.shmkv'), '-j: %s' % st)
    check(data(path('up2.shmkv')) == data(path('fresh.shmkv')), 'under a limit: other bytes')
    check(os.listdir(spill) == [], 'spill files left: %s' % os.listdir(spill))
    r = run('image', 'verify', path('up.shmkv'), text=True)
    check(r.returncode == 0 and 'ok: 9705 entries verified' in r.stdout, 'verify: %s' % r.stdout)
    r = run('image', 'dump', path('up.shmkv'), text=True)
    meta = json.loads(r.stdout.split('\n', 1)[0])['shmkv_meta']
    check(r.returncode == 0 and meta['format'] == 2 and meta['name'] == 'geo' and
          meta['seed'] == 7 and meta['created'] == 1764892800, 'dump meta: %s' % meta)

    # 2. refusals: exit 2, a message naming the file, nothing written
    short = path('short.shmkv')
    with open(short, 'wb') as f:
        f.write(data(GEO_V1)[:200000])
    for args, want in (([path('fresh.shmkv')], path('fresh.shmkv') + ': already format 2'),
                       ([short], short + ': 200000 bytes, its header (file_size at offset 32)'),
                       ([GEO_V1, GEO_V1], 'upgrade: expected one OLD image, got 2'),
                       ([path('none.shmkv')], path('none.shmkv') + ': No such file')):
        r = run('image', 'upgrade', '-o', path('bad.shmkv'), *args, text=True)
        check(r.returncode == 2 and want in r.stderr, '%s: exit %d: %s' % (args, r.returncode,
                                                                          r.stderr))
        check(not os.path.exists(path('bad.shmkv')), '%s: an output was left' % args)
    r = run('image', 'upgrade', GEO_V1, text=True)
    check(r.returncode == 2 and '-o OUT is required' in r.stderr, 'no -o: %s' % r.stderr)
    r = run('-j', 'image', 'upgrade', '-o', '-', GEO_V1, text=True)  # -j: the error as JSON
    check(r.returncode == 2 and '-j and -o - both' in json.loads(r.stdout)['error'],
          '-j -o -: %s' % r.stdout)
    old = path('old.shmkv')
    shutil.copyfile(GEO_V1, old)
    r = run('image', 'upgrade', '-o', old, old, text=True)
    check(r.returncode == 2 and 'is also the output' in r.stderr, 'in place: %s' % r.stderr)
    check(data(old) == data(GEO_V1), 'in place: the input was changed')

    # 3. the other verbs on a format 1 file: the reader's advice
    for verb, extra, code in (('inspect', [], 2), ('dump', [], 2), ('get', ['geo:1000000:name'], 2),
                              ('verify', [], 1)):
        r = run('image', verb, old, *extra, text=True)
        check(r.returncode == code and old in r.stderr and ADVICE in r.stderr,
              'image %s of format 1: exit %d: %s' % (verb, r.returncode, r.stderr))
    r = run('image', 'build', '--format', '1', '-o', path('b.shmkv'), '-', input=b'', text=False)
    check(r.returncode == 2 and b"format 1 is retired" in r.stderr and
          b"'shmctl image upgrade OLD -o NEW'" in r.stderr, '--format 1: %s' % r.stderr)
    r = run('image', 'build', '--format', '2', '-o', path('b.shmkv'), '-', input=b'', text=False)
    check(r.returncode == 2 and b'expected jsonl or tsv' in r.stderr, '--format 2: %s' % r.stderr)
    check(not os.path.exists(path('b.shmkv')), 'a refused build left an output')
    r = run('image', 'help', text=True)
    check('image upgrade -o { NEW | - } [REBUILD_OPTS] OLD' in r.stdout, 'help: %s' % r.stdout)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish('upgrade_cli_test')
