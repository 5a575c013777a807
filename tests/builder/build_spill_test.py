#!/usr/bin/python3
# (Debian's python3, whose dist-packages hold python3-xxhash)
"""build_spill_test: builds bounded in memory (--memory-limit) give the bytes of
the in-memory build, within the limit.
  1. A large input (image >= 4x a 24 MiB limit): random keys, 80-byte values,
     several types, values shared across the whole input, duplicates far apart
     (in different spill runs): byte-identical to the in-memory build for
     --on-duplicate last and first, peak RSS (wait4) <= limit + 32 MiB, the
     --progress lines of the spill phases, nothing left in --tmpdir.
  2. A smaller input in a nearly full index (--load-factor 0.97): keys
     displaced past the last bucket wrap to bucket 0 (checked in the index),
     identical, for --on-duplicate first and last and with -o -; -o - at the
     default fill and a piped input identical; a duplicate with
     --on-duplicate error fails with the in-memory build's message, leaving
     nothing.
  3. SIGINT and SIGTERM while spilling (O_TMPFILE spill files, and the named
     ones of filesystems without it): no output, no temporary, tmpdir empty.
  4. A value too short to be worth sharing (6 bytes) is not shared.
  6. Four --part builds of the large input under the limit, and their
     join under it: the large image byte for byte, each within the limit.
  5. Skew no hash split divides: one key in 600,000 records, one value in
     600,000 entries: identical, within the limit, the same duplicate error.
  7. Bad options (a size that is none, under 1 MiB, a --tmpdir that does
     not exist; join's limit too): exit 2 naming the option, an existing
     output untouched.
  8. Inline and OUT records, 8-aligned values, shared values, expiry past
     and future: spilled under the limit, byte-identical to the in-memory
     build; records that pack badly (two 42-byte records a bucket) at a fill
     of 1.0, where placement needs more buckets: identical; 3 --part builds
     joined under the limit: the one build.
--quick (sanitizer builds, AArch64 under qemu-user, where RSS is not the
builder's own): a 4 MiB limit and an eighth of the records, no RSS checks.
usage: build_spill_test.py SHMCTL [--quick]"""
import filecmp
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import xxhash

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from pyutil import check, finish, wait_for  # noqa: E402 (tests/pyutil.py)

QUICK = '--quick' in sys.argv
LIMIT = (4 if QUICK else 24) << 20
BIG = 180_000 if QUICK else 1_100_000
ALLOWANCE = 32 << 20
ENV = dict(os.environ, SOURCE_DATE_EPOCH='1700000000')


def path(name):
    return name if os.path.isabs(name) else os.path.join(tmp, name)


def run(*args, env=ENV):
    """Runs shmctl; (returncode, stdout, stderr, peak RSS in bytes)."""
    p = subprocess.Popen([shmctl] + [str(a) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stdout.close()
    p.stderr.close()
    return p.returncode, out, err.decode(), ru.ru_maxrss * 1024


def same(a, b):
    return filecmp.cmp(a, b, shallow=False)


def gen_here(name, n, rng, dup_rate, short=False, expiry=False):
    pool = ['shared across the input, and long enough to be worth it: %03d %s' % (i, 'x' * i)
            for i in range(40)]
    keys = []
    unique = 0
    with open(name, 'w') as f:
        for i in range(n):
            if keys and rng.random() < dup_rate:
                k = keys[rng.randrange(len(keys) // 4 + 1)]  # an early key: another run
            else:
                k = 'key_%d_%08x' % (i, rng.getrandbits(32))
                keys.append(k)
                unique += 1
            r = rng.random()
            if r < 0.08:
                v = rng.choice(pool)
            elif r < 0.12:
                v = rng.randint(-2**40, 2**40)
            elif r < 0.15:
                v = [rng.random() for _ in range(rng.randint(1, 6))]
            elif r < 0.18:
                v = ['s%d' % rng.randint(0, 99), 'shared list item', 'z' * rng.randint(0, 20)]
            elif r < 0.19:
                v = rng.random() < 0.5
            elif short == 'm' and r < 0.6:
                v = '%x' % rng.getrandbits(rng.choice((8, 40, 80)))
            elif short and short != 'm':
                v = '%x' % rng.getrandbits(40)
            else:
                v = '%080x' % rng.getrandbits(320)
            rec = {'key': k, 'value': v}
            if expiry and rng.random() < 0.3:  # past (absent to readers) or future
                rec['expires'] = rng.choice((1, 1700000000, 4000000000, rng.randint(1, 2**32 - 1)))
            f.write(json.dumps(rec) + '\n')
    return unique


def gen(name, n, seed, dup_rate, short=False, expiry=False):
    """Writes the input in a child process: the peak RSS a child reports
    (wait4, getrusage) includes its parent's at fork and exec (Linux carries
    the maxrss of the image it replaces), so this process stays small."""
    r = subprocess.run([sys.executable, __file__, '--gen', path(name), str(n), str(seed),
                        str(dup_rate), (short if isinstance(short, str) else '1') if short else '',
                        '1' if expiry else ''], capture_output=True, text=True, check=True)
    return int(r.stdout)


def wrapped_keys(img):
    """Records of an image found in a bucket before their home (displaced
    past the last bucket), among the first 4096 buckets."""
    with open(img, 'rb') as f:
        data = f.read()
    buckets = struct.unpack_from('<Q', data, 48)[0]
    seed, hbits = struct.unpack_from('<Q', data, 64)[0], struct.unpack_from('<I', data, 60)[0]
    check(hbits == 64, 'hash_bits %d' % hbits)
    ix = struct.unpack_from('<Q', data, 192 + 8)[0]
    wrapped = 0
    for c in range(min(buckets, 4096)):
        base = ix + 128 * c
        n = data[base]
        for i in range(n):
            r = base + (data[base + 8 + 2 * i] & 0x7f)  # dir = tag << 7 | off
            kind = data[r]
            if kind & 0x80:
                e = (int.from_bytes(data[r + 1:r + 6], 'little')) << 3
                key = data[e + 8:e + 8 + struct.unpack_from('<H', data, e + 2)[0]]
            else:
                at = r + 3 + (4 if kind & 0x40 else 0)
                key = data[at:at + data[r + 1]]
            home = (xxhash.xxh3_64_intdigest(key, seed=seed) * buckets) >> 64
            wrapped += home > c
    return wrapped


def spill_left():
    return os.listdir(spilldir)


def stats(out):
    return json.loads(out)


if sys.argv[1] == '--gen':
    _, _, name, n, seed, rate, short, expiry = sys.argv
    print(gen_here(name, int(n), random.Random(int(seed)), float(rate), short, expiry == '1'))
    sys.exit(0)

shmctl = sys.argv[1]
tmp = tempfile.mkdtemp(prefix='shmkv-spill-test.')
spilldir = os.path.join(tmp, 'spill')
os.mkdir(spilldir)

try:
    t0 = time.monotonic()
    gen('big.jsonl', BIG, 14, 0.01)
    gen_s = time.monotonic() - t0

    # 1. the large build (first: in 2. and 5.)
    buckets_big = 0
    for dup in ('last',):
        ref, out = path('ref-%s.img' % dup), path('spill-%s.img' % dup)
        rc, o, e, rss_mem = run('-j', 'image', 'build', '-o', ref, '--memory-limit', 'none',
                                '--on-duplicate', dup, path('big.jsonl'))
        check(rc == 0, 'in-memory build (%s): %s' % (dup, e))
        rc, o, e, rss = run('-j', '--progress', 'image', 'build', '-o', out, '--memory-limit',
                            LIMIT, '--tmpdir', spilldir, '--on-duplicate', dup, path('big.jsonl'))
        check(rc == 0, 'spilling build (%s): %s' % (dup, e))
        if rc != 0:
            continue
        st = stats(o)
        buckets_big = st['buckets']
        check(st['image_bytes'] >= 4 * LIMIT, 'image of %d bytes is not 4x the limit' % st['image_bytes'])
        check(st['duplicates'] > 1000, 'duplicates: %d' % st['duplicates'])
        check(st['dedup']['shared_values'] >= 40, 'shared values: %s' % st['dedup'])
        check(same(ref, out), 'spilled image (%s) differs from the in-memory one' % dup)
        check(QUICK or rss <= LIMIT + ALLOWANCE, 'peak RSS %d MiB > limit 24 MiB + 32 MiB (in memory: %d MiB)'
              % (rss >> 20, rss_mem >> 20))
        check(QUICK or rss_mem > LIMIT + ALLOWANCE, 'the in-memory build took only %d MiB: the test '
              'proves nothing' % (rss_mem >> 20))
        for phase in ('reading', 'sorting', 'sharing', 'placing', 'writing'):
            check(('\n%s: ' % phase) in '\n' + e, 'no --progress line for %s: %s' % (phase, e[-500:]))
        check(not spill_left(), 'spill files left: %s' % spill_left())
        print('%s: image %d MiB, peak RSS %d MiB spilling (limit %d MiB), %d MiB in memory'
              % (dup, st['image_bytes'] >> 20, rss >> 20, LIMIT >> 20, rss_mem >> 20))
    os.unlink(path('spill-last.img'))

    # 6. parts built under the limit, joined under it: the large image again
    # (4 parts: join verifies each fragment whole first, mapped, so its peak
    # is also at least the largest fragment's size, here about 30 MiB)
    frags = []
    for k in (1, 2, 3, 4):
        frags.append(path('frag%d.img' % k))
        rc, _, e, rss = run('image', 'build', '-o', frags[-1], '--part', '%d/4' % k, '--buckets',
                            buckets_big, '--filter-part', '--memory-limit', LIMIT, '--tmpdir',
                            spilldir, '--on-duplicate', 'last', path('big.jsonl'))
        check(rc == 0 and (QUICK or rss <= LIMIT + ALLOWANCE), 'part %d: %s, RSS %d MiB'
              % (k, e, rss >> 20))
    rc, _, e, rss = run('image', 'join', '-o', path('joined.img'), '--memory-limit', LIMIT,
                        '--tmpdir', spilldir, *frags)
    check(rc == 0 and same(path('joined.img'), path('ref-last.img')),
          'join under the limit differs from the single build: %s' % e)
    check(QUICK or rss <= LIMIT + ALLOWANCE, 'join: peak RSS %d MiB' % (rss >> 20))
    print('join of 4 parts: peak RSS %d MiB (limit %d MiB)' % (rss >> 20, LIMIT >> 20))
    for f in frags + [path('joined.img')]:
        os.unlink(f)
    check(not spill_left(), 'spill files left after the parts and join: %s' % spill_left())

    # 2. a nearly full index: keys displaced past the last bucket wrap to
    # bucket 0; -o -; the duplicate error
    gen('small.jsonl', 150_000, 15, 0.01, short=True)
    for dup in ('first', 'last'):
        a, b = path('w-mem.img'), path('w-spill.img')
        rc1, _, e1, _ = run('image', 'build', '--load-factor', '0.97', '-o', a, '--memory-limit',
                            'none', '--on-duplicate', dup, path('small.jsonl'))
        rc2, _, e2, _ = run('image', 'build', '--load-factor', '0.97', '-o', b, '--memory-limit',
                            '2M', '--tmpdir', spilldir, '--on-duplicate', dup, path('small.jsonl'))
        check(rc1 == 0 and rc2 == 0, 'full-index builds: %s %s' % (e1, e2))
        check(rc2 == 0 and same(a, b), 'full index (%s): spilled image differs' % dup)
    check(rc2 != 0 or wrapped_keys(b) > 0,
          'no key wrapped past the last bucket: the test proves nothing')
    with open(path('w-o.img'), 'wb') as f:
        r2 = subprocess.run([shmctl, 'image', 'build', '--load-factor', '0.97', '-o', '-',
                             '--memory-limit', '2M', '--tmpdir', spilldir, '--on-duplicate',
                             'last', path('small.jsonl')], stdout=f, env=ENV)
    check(r2.returncode == 0 and same(b, path('w-o.img')), 'full index, -o -: differs')
    # standard output
    with open(path('o-mem.img'), 'wb') as f:
        r1 = subprocess.run([shmctl, 'image', 'build', '-o', '-', '--memory-limit', 'none',
                             '--on-duplicate', 'last', path('small.jsonl')], stdout=f, env=ENV)
    with open(path('o-spill.img'), 'wb') as f:
        r2 = subprocess.run([shmctl, 'image', 'build', '-o', '-', '--memory-limit', '2M', '--tmpdir',
                             spilldir, '--on-duplicate', 'last', path('small.jsonl')], stdout=f,
                            env=ENV)
    check(r1.returncode == 0 and r2.returncode == 0 and same(path('o-mem.img'), path('o-spill.img')),
          '-o -: spilled stream differs')
    # a pipe as the input, read in windows
    with open(path('small.jsonl'), 'rb') as fin:
        p3 = subprocess.Popen(['cat'], stdin=fin, stdout=subprocess.PIPE)
        r3 = subprocess.run([shmctl, 'image', 'build', '-o', path('p-spill.img'), '--memory-limit',
                             '2M', '--tmpdir', spilldir, '--on-duplicate', 'last', '-'],
                            stdin=p3.stdout, stdout=subprocess.DEVNULL, env=ENV)
        p3.stdout.close()
        p3.wait()
    check(r3.returncode == 0 and same(path('o-mem.img'), path('p-spill.img')),
          'a piped input: spilled image differs')
    # the duplicate error: same message, nothing written
    rc1, _, e1, _ = run('image', 'build', '-o', path('e.img'), '--memory-limit', 'none',
                        path('small.jsonl'))
    rc2, _, e2, _ = run('image', 'build', '-o', path('e.img'), '--memory-limit', '2M', '--tmpdir',
                        spilldir, path('small.jsonl'))
    check(rc1 == 2 and 'duplicate key' in e1 and 'first at' in e1, 'in-memory duplicate: ' + e1)
    check(rc2 == 2 and e2 == e1, 'spilled duplicate error differs:\n%s\n%s' % (e1, e2))
    check(not os.path.exists(path('e.img')), 'a failed build left an image')
    check(not spill_left(), 'spill files left after a failure: %s' % spill_left())

    # 3. signals while spilling
    outdir = path('sig')
    os.mkdir(outdir)
    for sig, named in ((signal.SIGINT, False), (signal.SIGTERM, True)):
        env = dict(ENV)
        if named:
            env['SHMKV_BUILD_NO_TMPFILE'] = '1'
        # records through a pipe that stops once the build spills: the
        # signal comes while it is spilling, whatever the machine's speed
        p = subprocess.Popen([shmctl, 'image', 'build', '-o', os.path.join(outdir, 'x.img'),
                              '--memory-limit', str(LIMIT), '--tmpdir', spilldir, '--on-duplicate',
                              'last', '-'], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env)

        def spilling():
            try:
                for fd in os.listdir('/proc/%d/fd' % p.pid):
                    if os.readlink('/proc/%d/fd/%s' % (p.pid, fd)).startswith(spilldir + '/'):
                        return True
            except OSError:
                pass
            return False
        with open(path('big.jsonl'), 'rb') as f:
            while not spilling():
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                p.stdin.write(chunk)
                p.stdin.flush()
                time.sleep(0.01)
        check(wait_for(spilling, 30), '%s: the build never spilled' % sig.name)
        p.send_signal(sig)
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
        p.wait(60)
        p.stderr.close()
        check(p.returncode == -sig, '%s: exit %s' % (sig.name, p.returncode))
        check(not spill_left(), '%s: spill files left: %s' % (sig.name, spill_left()))
        check(not os.listdir(outdir), '%s: left in the output directory: %s'
              % (sig.name, os.listdir(outdir)))

    # 5. skew: one key repeated and one value shared, each by 600,000
    # records, which no hash split can divide: streamed, within the limit
    hot = 60_000 if QUICK else 600_000
    with open(path('skew.jsonl'), 'w') as f:
        for i in range(hot):
            f.write('{"key":"hot","value":"hot value %d, long enough to count: %s"}\n' % (i, 'x' * 40))
            f.write('{"key":"k%d","value":"one value shared by very many entries, 40+ bytes"}\n' % i)
            f.write('{"key":"u%d","value":"%040x"}\n' % (i, i * 2654435761))
    for dup in ('first', 'last', 'error'):
        rc1, _, e1, _ = run('image', 'build', '-o', path('k-mem.img'), '--memory-limit', 'none',
                            '--on-duplicate', dup, path('skew.jsonl'))
        rc2, _, e2, rss = run('image', 'build', '-o', path('k-spill.img'), '--memory-limit', LIMIT,
                              '--tmpdir', spilldir, '--on-duplicate', dup, path('skew.jsonl'))
        if dup == 'error':
            check(rc1 == 2 and rc2 == 2 and e1 == e2 and 'duplicate key "hot"' in e2,
                  'skew, error: %s / %s' % (e1, e2))
        else:
            check(rc1 == 0 and rc2 == 0 and same(path('k-mem.img'), path('k-spill.img')),
                  'skew (%s): spilled image differs: %s %s' % (dup, e1, e2))
        check(QUICK or rss <= LIMIT + ALLOWANCE, 'skew (%s): peak RSS %d MiB' % (dup, rss >> 20))
    check(not spill_left(), 'spill files left after skew: %s' % spill_left())

    # 4. a value of 7 stored bytes is never shared (a reference is no smaller)
    with open(path('tiny.jsonl'), 'w') as f:
        f.write('{"key":"a","value":"abcdef"}\n{"key":"b","value":"abcdef"}\n')
    for lim in ('none', '1M'):
        rc, o, e, _ = run('-j', 'image', 'build', '-o', path('tiny.img'), '--memory-limit', lim,
                          '--tmpdir', spilldir, path('tiny.jsonl'))
        check(rc == 0 and stats(o)['dedup']['shared_values'] == 0 and
              stats(o)['dedup']['saved_bytes'] == 0, 'a 6-byte string was shared: %s %s' % (o, e))
    # 5. bad options: a clear error naming the option, nothing written, an
    #    existing output untouched
    with open(path('keep.img'), 'w') as f:
        f.write('precious, not an image')
    for args, want in ((['--memory-limit', '12Q'], '--memory-limit 12Q: expected a size'),
                       (['--memory-limit', '1000'], '--memory-limit 1000: expected a size'),
                       (['--memory-limit', '1M', '--tmpdir', path('no-such-dir')],
                        'no-such-dir')):
        rc, _, e, _ = run('image', 'build', '-o', path('keep.img'), *args, path('small.jsonl'))
        check(rc == 2 and want in e, 'bad %s: exit %d: %s' % (args, rc, e))
        with open(path('keep.img')) as f:
            check(f.read() == 'precious, not an image', 'bad %s replaced the output' % args)
    rc, _, e, _ = run('image', 'join', '--memory-limit', 'abc', '-o', path('keep.img'),
                      path('tiny.img'))
    check(rc == 2 and '--memory-limit abc' in e, 'join, bad limit: exit %d: %s' % (rc, e))

    # 8. inline and OUT records, expiry: the streamed index gives the in-memory bytes
    n2 = 40_000 if QUICK else 400_000
    gen('mixed.jsonl', n2, 16, 0.01, short='m', expiry=True)
    a, b = path('m-mem.img'), path('m-spill.img')
    rc1, o1, e1, _ = run('-j', 'image', 'build', '-o', a, '--memory-limit', 'none',
                         '--on-duplicate', 'last', path('mixed.jsonl'))
    rc2, o2, e2, rss = run('-j', '--progress', 'image', 'build', '-o', b,
                           '--memory-limit', LIMIT, '--tmpdir', spilldir, '--on-duplicate', 'last',
                           path('mixed.jsonl'))
    check(rc1 == 0 and rc2 == 0, 'inline and OUT builds: %s %s' % (e1, e2[-500:]))
    if rc1 == 0 and rc2 == 0:
        st = stats(o1)
        check(same(a, b), 'inline and OUT: the spilled image differs from the in-memory one')
        check('\nsorting: ' in '\n' + e2, 'inline and OUT: the build did not spill')
        check(st['entries_bytes'] > 0 and st['index_bytes'] > st['entries_bytes'] / 4,
              'inline and OUT: no mix of inline and OUT records: %s' % st)
        check(st['dedup']['shared_values'] >= 40, 'inline and OUT: shared values: %s' % st['dedup'])
        check(QUICK or rss <= LIMIT + ALLOWANCE, 'inline and OUT: peak RSS %d MiB' % (rss >> 20))
        print('inline and OUT: image %d MiB, peak RSS %d MiB spilling (limit %d MiB)'
              % (st['image_bytes'] >> 20, rss >> 20, LIMIT >> 20))
    # sizes that pack badly at a fill of 1.0: placed again with more buckets
    with open(path('pack.jsonl'), 'w') as f:
        for i in range(30_000):
            f.write('{"key":"key_%06d","value":"%s"}\n' % (i, 'v' * 25))
    rc1, o1, e1, _ = run('-j', 'image', 'build', '--load-factor', '1.0', '-o', a,
                         '--memory-limit', 'none', path('pack.jsonl'))
    rc2, _, e2, _ = run('image', 'build', '--load-factor', '1.0', '-o', b,
                        '--memory-limit', '1M', '--tmpdir', spilldir, path('pack.jsonl'))
    check(rc1 == 0 and rc2 == 0 and same(a, b), 'packing badly: differs: %s %s' % (e1, e2))
    check(rc1 != 0 or stats(o1)['buckets'] >= 15_000,
          'packing badly: %s buckets, not placed again' % (rc1 == 0 and stats(o1)['buckets']))
    # parts under the limit, joined under it
    rc1, o1, e1, _ = run('-j', 'image', 'build', '-o', a, '--memory-limit', 'none',
                         '--on-duplicate', 'last', path('mixed.jsonl'))
    frags = []
    for k in (1, 2, 3):
        frags.append(path('m-frag%d.img' % k))
        rc, _, e, _ = run('image', 'build', '-o', frags[-1], '--part', '%d/3' % k,
                          '--buckets', stats(o1)['buckets'] if rc1 == 0 else 1, '--filter-part',
                          '--memory-limit', LIMIT, '--tmpdir', spilldir, '--on-duplicate', 'last',
                          path('mixed.jsonl'))
        check(rc == 0, 'part %d: %s' % (k, e))
    rc, _, e, _ = run('image', 'join', '-o', b, '--memory-limit', LIMIT, '--tmpdir', spilldir, *frags)
    check(rc == 0 and same(a, b), 'inline and OUT: join under the limit differs from one build: %s' % e)
    check(not spill_left(), 'spill files left after inline and OUT: %s' % spill_left())
    print('generated the input in %.1f s, total %.1f s' % (gen_s, time.monotonic() - t0))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish('build_spill_test')
