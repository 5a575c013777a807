#!/usr/bin/python3
# (Debian's python3, whose dist-packages hold python3-xxhash)
"""build_parts_test: partitioned builds joined on "engines" of local processes.
Random records in 3 input files, with keys repeated across the files and values
repeated across parts. One build of all of them is the reference; then
  1. the xargs -P recipe: every part reads every file with --filter-part;
  2. the repartition recipe (Spark/Dask style): this script routes each record
     to its part with its own implementation of lib/FORMAT.md §14's part(key)
     (python3-xxhash), in input order, and one process per part builds its file
     without --filter-part;
and `image join` of the fragments must give the reference byte for byte, for
--on-duplicate last and first. Then the refusals: fragments out of order, of
another bucket count, damaged; a duplicate across files with
--on-duplicate error; --part without --buckets. Nothing is left behind.
usage: build_parts_test.py SHMCTL"""
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import xxhash

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from pyutil import check, finish  # noqa: E402 (tests/pyutil.py)

shmctl = sys.argv[1]
tmp = tempfile.mkdtemp(prefix='shmkv-parts-test.')
SEED = 0x53484D4B56763121  # the default hash seed
B, N = 1500, 4              # buckets, parts


def run(*args):
    return subprocess.run([shmctl] + [str(a) for a in args], capture_output=True, text=True)


def path(name):
    return os.path.join(tmp, name)


def same(a, b):
    with open(a, 'rb') as fa, open(b, 'rb') as fb:
        return fa.read() == fb.read()


# lib/FORMAT.md §5 and §14, written again here: the key's part
def part_of_key(key):
    h = xxhash.xxh3_64_intdigest(key, seed=SEED)
    home = (h * B) >> 64
    return ((home + 1) * N + B - 1) // B


def records(rng):
    pool = ['a value shared across parts, long enough: %d' % i for i in range(30)]
    keys, out = [], []
    for i in range(9000):
        if keys and rng.random() < 0.12:
            key = rng.choice(keys)  # a duplicate, often in another file
        else:
            key = rng.choice([b'k%d' % i, 'ключ-%d' % i, 'k\u00e9y %d' % i]) \
                if rng.random() < 0.9 else bytes(rng.randrange(256) for _ in range(7))
            if isinstance(key, str):
                key = key.encode()
            keys.append(key)
        r = rng.random()
        if r < 0.4:
            val = rng.choice(pool)
        elif r < 0.6:
            val = rng.randrange(-10**12, 10**12)
        elif r < 0.8:
            val = [rng.choice(pool)[:rng.randrange(1, 20)] for _ in range(rng.randrange(1, 4))]
        else:
            val = 'x' * rng.randrange(0, 120)
        out.append((key, val))
    return out


def line(key, val):
    try:
        k = {'key': key.decode()}
    except UnicodeDecodeError:
        k = {'key_base64': base64.b64encode(key).decode()}
    k['value'] = val
    return json.dumps(k, ensure_ascii=False) + '\n'


def procs(cmds):
    """Runs the commands at once, as hosts would; returns their results."""
    ps = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for c in cmds]
    return [(p.wait(), p.communicate()) for p in ps]


try:
    rng = random.Random(14)
    recs = records(rng)
    inputs = [path('in%d.jsonl' % f) for f in range(3)]
    third = len(recs) // 3
    for f, name in enumerate(inputs):
        with open(name, 'w') as fh:
            for key, val in recs[f * third:(f + 1) * third if f < 2 else len(recs)]:
                fh.write(line(key, val))
    common = ['--buckets', B, '--created', 1700000000, '--name', 'parts']

    for dup in ('last', 'first'):
        whole = path('whole-%s.shmkv' % dup)
        r = run('image', 'build', '-o', whole, '--on-duplicate', dup, *common, *inputs)
        check(r.returncode == 0, 'whole build (%s): %s' % (dup, r.stderr))

        # 1. xargs -P: every part reads all the inputs and keeps its own keys
        cmd = ('seq 1 %d | xargs -P %d -I{} "$SHMCTL" image build --part {}/%d '
               '--filter-part --on-duplicate %s %s -o "$DIR/x{}.shmkv" %s'
               % (N, N, N, dup, ' '.join(str(c) for c in common), ' '.join(inputs)))
        r = subprocess.run(['sh', '-c', cmd], capture_output=True, text=True,
                           env=dict(os.environ, SHMCTL=shmctl, DIR=tmp))
        check(r.returncode == 0, 'xargs parts (%s): %s' % (dup, r.stderr))
        frags = [path('x%d.shmkv' % k) for k in range(1, N + 1)]
        r = run('image', 'join', '-o', path('xjoin.shmkv'), *frags)
        check(r.returncode == 0, 'join of xargs parts (%s): %s' % (dup, r.stderr))
        check(same(whole, path('xjoin.shmkv')),
              'join of the xargs parts differs from one build (%s)' % dup)

        # 2. repartition: route each record to its part, in input order
        parts = {k: [] for k in range(1, N + 1)}
        for key, val in recs:
            parts[part_of_key(key)].append(line(key, val))
        for k, lines in parts.items():
            with open(path('p%d.jsonl' % k), 'w') as fh:
                fh.writelines(lines)
        res = procs([[shmctl, 'image', 'build', '--part', '%d/%d' % (k, N), '--on-duplicate',
                      dup, *[str(c) for c in common], '-o', path('r%d.shmkv' % k),
                      path('p%d.jsonl' % k)] for k in range(1, N + 1)])
        for k, (rc, (out, err)) in enumerate(res, 1):
            check(rc == 0, 'part %d from its own records (%s): %s' % (k, dup, err))
        r = run('image', 'join', '-o', path('rjoin.shmkv'),
                *[path('r%d.shmkv' % k) for k in range(1, N + 1)])
        check(r.returncode == 0, 'join of repartitioned parts (%s): %s' % (dup, r.stderr))
        check(same(whole, path('rjoin.shmkv')),
              'join of the repartitioned parts differs from one build (%s)' % dup)
        r = run('image', 'verify', path('rjoin.shmkv'))
        check(r.returncode == 0, 'verify of the join: ' + r.stdout + r.stderr)

    # a record routed to the wrong part is an error without --filter-part
    r = run('image', 'build', '--part', '1/%d' % N, *common, '-o', path('wrong.shmkv'),
            path('p2.jsonl'))
    check(r.returncode == 2 and 'belongs to part 2/%d' % N in r.stderr,
          'wrong part: %d %s' % (r.returncode, r.stderr))
    check(not os.path.exists(path('wrong.shmkv')), 'a refused part left an image')

    frags = [path('r%d.shmkv' % k) for k in range(1, N + 1)]
    out = path('bad-join.shmkv')
    # out of order
    r = run('image', 'join', '-o', out, frags[1], frags[0], *frags[2:])
    check(r.returncode == 2 and 'part order' in r.stderr, 'swapped fragments: ' + r.stderr)
    # one missing: the others are then parts of a 3-way split
    r = run('image', 'join', '-o', out, *frags[:3])
    check(r.returncode == 2, 'a missing fragment was joined: ' + r.stderr)
    # another bucket count
    r = run('image', 'build', '--part', '%d/%d' % (N, N), '--buckets', B + 1, '--created',
            1700000000, '--name', 'parts', '--on-duplicate', 'last', '--filter-part', '-o',
            path('other.shmkv'), *inputs)
    check(r.returncode == 0, 'other bucket count: ' + r.stderr)
    r = run('image', 'join', '-o', out, *frags[:3], path('other.shmkv'))
    check(r.returncode == 2 and 'bucket count differs' in r.stderr, 'bucket count: ' + r.stderr)
    # damaged
    shutil.copy(frags[2], path('damaged.shmkv'))
    with open(path('damaged.shmkv'), 'r+b') as fh:
        fh.seek(os.path.getsize(path('damaged.shmkv')) - 5000)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 0x40]))
    r = run('image', 'join', '-o', out, frags[0], frags[1], path('damaged.shmkv'), frags[3])
    check(r.returncode == 2 and 'damaged.shmkv' in r.stderr, 'damaged fragment: ' + r.stderr)
    check(not os.path.exists(out), 'a refused join left an image')

    # a duplicate across input files with --on-duplicate error names both places
    r = run('image', 'build', '--part', '1/1', *common, '-o', path('dup.shmkv'), *inputs)
    check(r.returncode == 2 and 'duplicate key' in r.stderr and 'first at' in r.stderr,
          'duplicate across files: ' + r.stderr)
    r = run('image', 'build', '--part', '1/2', '-o', path('nob.shmkv'), inputs[0])
    check(r.returncode == 2 and '--buckets' in r.stderr, '--part without --buckets: ' + r.stderr)
    left = [f for f in os.listdir(tmp) if f.startswith('.')]
    check(not left, 'temporary files left: %s' % left)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish('build_parts_test')
