#!/usr/bin/python3
# (Debian's python3, whose dist-packages hold python3-xxhash)
"""build_limits_test: the builder's bounds on bad or huge input, and the image
tools on images they once refused or took hours over.
  1. A 1 GiB line, fed through a FIFO by a thread of this process (no disk),
     under --memory-limit 64M: the build fails naming the FIFO, line 1 and
     the limit, after reading a few MiB, within the limit (peak RSS by
     wait4); /dev/zero the same, as JSONL and as TSV, and with no
     --memory-limit (the cap then follows the default limit).
  2. A line just over the cap in a regular file (read whole, parsed on one
     thread and on two): the same error naming file and line; a line just
     under it builds.
  3. join under a limit: an entry larger than a record may take names the
     fragment and the entry.
  4. A lone surrogate escape (key, value, list element) says so, with the
     line; a valid pair builds.
  5. A header declaring 1 TiB over a few KiB of data (a sparse file):
     inspect, verify, dump and get refuse it at once, naming the padding;
     the header alone in a 4 KiB file is truncated, as the reader says.
  6. An image whose name is not UTF-8: verify accepts it, dump writes
     name_base64, and the dump builds the same image byte for byte.
--quick (sanitizer builds, AArch64 under qemu-user, where RSS is not the
builder's own): no RSS checks.
usage: build_limits_test.py SHMCTL [--quick]"""
import filecmp
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

import xxhash

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from pyutil import check, finish  # noqa: E402 (tests/pyutil.py)

QUICK = '--quick' in sys.argv
MiB = 1 << 20
ALLOWANCE = 32 * MiB  # builder/README.md "Memory": code, stacks, buffers
LINE_SHARE = 128      # a line may take 1/128 of the limit (builder/internal.h)
ENV = dict(os.environ, SOURCE_DATE_EPOCH='1700000000')


def run(*args, timeout=300):
    """Runs shmctl; (returncode, stdout, stderr, peak RSS in bytes, seconds).
    Killed after timeout seconds."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.Popen([shmctl] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                             stdout=o, stderr=e, env=ENV)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        return (p.returncode, o.read(), e.read().decode(errors='replace'), ru.ru_maxrss * 1024,
                time.monotonic() - t0)


def path(name):
    return os.path.join(tmp, name)


def feed_fifo(fifo, head, body_bytes, tail):
    """A thread that writes head, body_bytes of 'x' and tail into fifo, and
    stops when the reader goes away; returns it started."""
    def feed():
        try:
            with open(fifo, 'wb') as f:
                f.write(head)
                chunk = b'x' * MiB
                left = body_bytes
                while left > 0:
                    f.write(chunk[:min(left, MiB)])
                    left -= MiB
                f.write(tail)
        except (BrokenPipeError, OSError):
            pass
    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return t


def long_line_via_fifo():
    limit = 64 * MiB
    fifo = path('big.fifo')
    os.mkfifo(fifo)
    feeder = feed_fifo(fifo, b'{"key": "k", "value": "', 1 << 30, b'"}\n')
    rc, _, e, rss, secs = run('image', 'build', '--memory-limit', '64M', '-o', path('big.shmkv'),
                              fifo)
    feeder.join(timeout=60)
    check(rc == 2 and '%s:1: line of at least' % fifo in e and 'memory limit of 64 MiB' in e,
          '1 GiB line through a FIFO: exit %d: %s' % (rc, e))
    check(QUICK or rss <= limit + ALLOWANCE,
          '1 GiB line under 64M: peak RSS %d MiB over %d MiB' % (rss >> 20, (limit + ALLOWANCE) >> 20))
    check(not os.path.exists(path('big.shmkv')), '1 GiB line: an output was left')
    print('1 GiB line via a FIFO: exit %d in %.1f s, peak %d MiB' % (rc, secs, rss >> 20))


def dev_zero():
    limit = 64 * MiB
    for fmt in ('jsonl', 'tsv'):
        rc, _, e, rss, secs = run('image', 'build', '--format', fmt, '--memory-limit', '64M',
                                  '-o', path('z.shmkv'), '/dev/zero', timeout=120)
        check(rc == 2 and '/dev/zero:1: line of at least' in e and '64 MiB' in e,
              '/dev/zero (%s): exit %d: %s' % (fmt, rc, e))
        check(QUICK or rss <= limit + ALLOWANCE,
              '/dev/zero (%s): peak RSS %d MiB' % (fmt, rss >> 20))
        print('/dev/zero as %s under 64M: exit %d in %.1f s, peak %d MiB' % (fmt, rc, secs, rss >> 20))
    # no limit: the cap follows the default one (half of MemAvailable)
    with open('/proc/meminfo') as f:
        avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith('MemAvailable:'))
    rc, _, e, rss, secs = run('image', 'build', '--memory-limit', 'none', '-o', path('z.shmkv'),
                              '/dev/zero', timeout=300)
    check(rc == 2 and '/dev/zero:1: line of at least' in e and 'default memory limit' in e,
          '/dev/zero without a limit: exit %d: %s' % (rc, e))
    # the line read whole (the cap, 1/128 of half the memory) plus slack
    check(QUICK or rss <= avail // 2 // 16 + ALLOWANCE,
          '/dev/zero without a limit: peak RSS %d MiB' % (rss >> 20))
    print('/dev/zero without a limit: exit %d in %.1f s, peak %d MiB' % (rc, secs, rss >> 20))


def long_line_in_file():
    limit = 256 * MiB
    cap = limit // LINE_SHARE
    for fmt, over, under in (
            ('jsonl', b'{"key": "b", "value": "' + b'y' * cap + b'"}\n',
             b'{"key": "b", "value": "' + b'y' * (cap - 40) + b'"}\n'),
            ('tsv', b'b\t' + b'y' * cap + b'\n', b'b\t' + b'y' * (cap - 10) + b'\n')):
        first = b'{"key": "a", "value": 1}\n' if fmt == 'jsonl' else b'a\t1\n'
        last = b'{"key": "c", "value": 1}\n' if fmt == 'jsonl' else b'c\t1\n'
        for name, body, good in (('over', over, False), ('under', under, True)):
            f = path('%s_%s.%s' % (name, fmt, fmt))
            with open(f, 'wb') as out:
                out.write(first + body + last)
            msgs = set()
            for threads in ('1', '2'):
                rc, _, e, _, _ = run('image', 'build', '--memory-limit', '256M', '--threads',
                                     threads, '-o', path('l.shmkv'), f)
                if good:
                    check(rc == 0, '%s line under the cap (%s, %s threads): exit %d: %s'
                          % (fmt, name, threads, rc, e))
                else:
                    check(rc == 2 and '%s:2: line of %d bytes' % (f, len(body) - 1) in e,
                          '%s line over the cap (%s threads): exit %d: %s' % (fmt, threads, rc, e))
                    msgs.add(e)
            check(len(msgs) <= 1, '%s: one thread and two say different things: %s' % (fmt, msgs))


def join_record_cap():
    frag = path('frag.shmkv')
    with open(path('frag.jsonl'), 'w') as f:
        f.write(json.dumps({'key': 'small', 'value': 'v'}) + '\n')
        f.write(json.dumps({'key': 'large', 'value': 'z' * (300 << 10)}) + '\n')
    rc, _, e, _, _ = run('image', 'build', '--part', '1/1', '--buckets', '4', '-o', frag,
                         path('frag.jsonl'))
    check(rc == 0, 'fragment: exit %d: %s' % (rc, e))
    rc, _, e, rss, _ = run('image', 'join', '--memory-limit', '16M', '-o', path('j.shmkv'), frag)
    check(rc == 2 and frag + ':' in e and 'record of %d bytes' % (5 + (300 << 10)) in e and
          'memory limit of 16 MiB' in e, 'join of a large entry under 16M: exit %d: %s' % (rc, e))
    rc, _, e, _, _ = run('image', 'join', '--memory-limit', '64M', '-o', path('j.shmkv'), frag)
    check(rc == 0, 'join under 64M: exit %d: %s' % (rc, e))


def surrogates():
    cases = [('{"key": "\\ud800", "value": "x"}', '"key": lone surrogate \\ud800'),
             ('{"key": "k", "value": "a\\udc00b"}', 'lone surrogate \\udc00'),
             ('{"key": "k", "value": ["ok", "\\ud83d"]}', 'element 2: lone surrogate \\ud83d'),
             ('{"key": "k", "value": "\\ud83d\\ud83d"}', 'lone surrogate \\ud83d')]
    for line, want in cases:
        with open(path('s.jsonl'), 'w') as f:
            f.write('{"key": "first", "value": 1}\n' + line + '\n')
        rc, _, e, _, _ = run('image', 'build', '-o', path('s.shmkv'), path('s.jsonl'))
        check(rc == 2 and path('s.jsonl') + ':2:' in e and want in e and
              'must be a string' not in e, '%s: exit %d: %s' % (line, rc, e))
    with open(path('s.jsonl'), 'w') as f:
        f.write('{"key": "\\ud83d\\ude00", "value": "\\ud83d\\ude00"}\n')
    rc, _, e, _, _ = run('image', 'build', '-o', path('s.shmkv'), path('s.jsonl'))
    check(rc == 0, 'a surrogate pair: exit %d: %s' % (rc, e))


def header_declares_a_tebibyte():
    small = path('small.shmkv')
    with open(path('small.jsonl'), 'w') as f:
        f.write('{"key": "a", "value": "x"}\n')
    rc, _, e, _, _ = run('image', 'build', '-o', small, path('small.jsonl'))
    check(rc == 0, 'small image: exit %d: %s' % (rc, e))
    d = bytearray(open(small, 'rb').read())
    struct.pack_into('<Q', d, 32, 1 << 40)  # file_size
    struct.pack_into('<Q', d, 504, xxhash.xxh3_64_intdigest(bytes(d[:504])))
    short = path('tib4k.shmkv')  # the header alone: truncated, as the reader says
    with open(short, 'wb') as f:
        f.write(d[:4096])
    rc, _, e, _, secs = run('image', 'verify', short, timeout=120)
    check(rc == 1 and 'image is 4096 bytes, its header says %d' % (1 << 40) in e and secs < 30,
          'verify of a 4 KiB file declaring 1 TiB: exit %d after %.1f s: %s' % (rc, secs, e))
    big = path('tib.shmkv')
    with open(big, 'wb') as f:
        f.write(d)
        try:
            f.truncate(1 << 40)
        except OSError as err:
            print('skipped the 1 TiB header: no sparse 1 TiB file here (%s)' % err)
            return
    for verb, rc_want in (('inspect', 2), ('verify', 1), ('dump', 2), ('get', 2)):
        args = ['image', verb, big] + (['a'] if verb == 'get' else [])
        rc, _, e, _, secs = run(*args, timeout=120)
        check(rc == rc_want and 'padding outside the sections' in e and secs < 30,
              '%s of a 1 TiB header: exit %d after %.1f s: %s' % (verb, rc, secs, e))
    os.unlink(big)


def name_not_utf8():
    src = path('n.jsonl')
    with open(src, 'w') as f:
        f.write('{"key": "a", "value": "x"}\n{"key": "b", "value": [1, 2]}\n')
    img, again = path('n.shmkv'), path('n2.shmkv')
    name = b'caf\xe9-\xff'
    p = subprocess.run([os.fsencode(shmctl), b'image', b'build', b'--name', name, b'-o',
                        os.fsencode(img), os.fsencode(src)], env=ENV, capture_output=True)
    check(p.returncode == 0, 'build --name not UTF-8: %s' % p.stderr)
    rc, _, e, _, _ = run('image', 'verify', img)
    check(rc == 0, 'verify of a name not UTF-8: exit %d: %s' % (rc, e))
    rc, out, e, _, _ = run('image', 'dump', img)
    check(rc == 0 and b'"name_base64"' in out, 'dump of a name not UTF-8: exit %d: %s' % (rc, e))
    with open(path('n.dump'), 'wb') as f:
        f.write(out)
    rc, _, e, _, _ = run('image', 'build', '-o', again, path('n.dump'))
    check(rc == 0 and filecmp.cmp(img, again, shallow=False),
          'the dump of a name not UTF-8 did not build the same image: exit %d: %s' % (rc, e))
    # name_base64 checked like a name
    for meta, want in (('{"name_base64": "AA=="}', 'no NUL byte'),
                       ('{"name_base64": "!!"}', 'not valid base64'),
                       ('{"name": "a", "name_base64": "YQ=="}', 'name or name_base64')):
        with open(path('m.jsonl'), 'w') as f:
            f.write('{"shmkv_meta": %s}\n{"key": "a", "value": 1}\n' % meta)
        rc, _, e, _, _ = run('image', 'build', '-o', path('m.shmkv'), path('m.jsonl'))
        check(rc == 2 and want in e, 'meta %s: exit %d: %s' % (meta, rc, e))


shmctl = os.path.abspath(sys.argv[1])
with tempfile.TemporaryDirectory(prefix='build_limits.') as tmp:
    long_line_via_fifo()
    dev_zero()
    long_line_in_file()
    join_record_cap()
    surrogates()
    header_declares_a_tebibyte()
    name_not_utf8()
finish('build_limits_test')
