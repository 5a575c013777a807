#!/usr/bin/env python3
"""The Python reader of the writes model test (README.md here): the shmkv
package's Cache, attached to a cache served by shmkv-loader for the whole
run, answering the driver's commands on stdin (model_reader.c's list):
keys, check GEN MS, iter, dump, dumpiter, quit. A Cache reads one
generation between two refresh() calls: a check's gets, get_many and
expires, and the iter after it, all read the generation it replies.

usage: model_reader.py ROOT CACHE   (python with shmkv installed)
"""
from __future__ import annotations

import sys
import time
import zlib

import shmkv


def field(b: bytes) -> bytes:
    """LEN:BYTES, as the driver hashes it."""
    return b'%d:' % len(b) + b


class Reader:
    """One attached Cache and the answers of its last check and iter."""

    def __init__(self, root: str, name: str) -> None:
        self.root, self.name = root, name
        self.cache: shmkv.Cache | None = None
        self.keys: list[bytes] = []
        self.answers: list[tuple[bytes, int] | None] = []
        self.entries: list[tuple[bytes, bytes, int]] = []

    def follow(self, gen: int, ms: int) -> None:
        """Refreshes (attaching again after StaleCache) until the generation
        is at least gen; raises RuntimeError after ms."""
        end = time.monotonic() + ms / 1000
        last = ''
        while True:
            try:
                if self.cache is None:
                    self.cache = shmkv.attach(self.name, self.root)
                else:
                    self.cache.refresh()
            except shmkv.StaleCache:  # the protocol 1 file retired: attach again
                assert self.cache is not None
                self.cache.close()
                self.cache = None
                continue
            except (shmkv.Unavailable, shmkv.CacheNotFound) as e:
                last = f'{type(e).__name__}: {e}'
            except shmkv.Error as e:  # a generation that did not map: again after the next publish
                last = f'{type(e).__name__}: {e}'
            if self.cache is not None and self.cache.generation >= gen:
                return
            if time.monotonic() > end:
                have = self.cache.generation if self.cache is not None else 0
                raise RuntimeError(f'no generation {gen} within {ms} ms (at {have}): {last}')
            time.sleep(0.001)

    def check(self, gen: int, ms: int) -> str:
        self.follow(gen, ms)
        c = self.cache
        assert c is not None
        batch = c.get_many(self.keys)
        crc, present = 0, 0
        self.answers = []
        for i, k in enumerate(self.keys):
            v = c.get(k)
            if v != batch[i]:
                raise RuntimeError(f'key {i}: get_many answers {batch[i]!r}, get {v!r}')
            if v is None:
                self.answers.append(None)
                crc = zlib.crc32(b'-\n', crc)
                continue
            if not isinstance(v, str):
                raise RuntimeError(f'key {i}: {type(v).__name__}, not a str')
            b = v.encode('utf-8')
            exp = c.expires(k) or 0
            self.answers.append((b, exp))
            crc = zlib.crc32(field(b) + b',%d\n' % exp, crc)
            present += 1
        return f'ok {c.generation} {crc:08x} {present}'

    def iterate(self) -> str:
        c = self.cache
        if c is None:
            raise RuntimeError('iter before check')
        seen: list[tuple[bytes, bytes, int]] = []
        for k, v in c.items():
            kb = k.encode('utf-8') if isinstance(k, str) else bytes(k)
            if not isinstance(v, str):
                raise RuntimeError(f'iteration: {type(v).__name__}, not a str')
            seen.append((kb, v.encode('utf-8'), c.expires(k) or 0))
        seen.sort()
        crc = 0
        for i, (k, v, exp) in enumerate(seen):
            if i and seen[i - 1][0] == k:
                raise RuntimeError('iteration yields a key twice')
            crc = zlib.crc32(field(k) + field(v) + b',%d\n' % exp, crc)
        if len(seen) != len(c):
            raise RuntimeError(f'len(cache) {len(c)}, the iteration {len(seen)}')
        self.entries = seen
        return f'ok {c.generation} {crc:08x} {len(seen)}'

    def dump(self) -> str:
        gen = self.cache.generation if self.cache is not None else 0
        toks = ['-' if a is None else f'{a[0].hex()},{a[1]}' for a in self.answers]
        return ' '.join([f'ok {gen}'] + toks)

    def dumpiter(self) -> str:
        gen = self.cache.generation if self.cache is not None else 0
        toks = [f'{k.hex()},{v.hex()},{e}' for k, v, e in self.entries]
        return ' '.join([f'ok {gen}'] + toks)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    r = Reader(sys.argv[1], sys.argv[2])
    for line in sys.stdin:
        words = line.split()
        try:
            if words and words[0] == 'keys':
                r.keys = [bytes.fromhex(w) for w in words[1:]]
                out = f'ok {len(r.keys)}'
            elif len(words) == 3 and words[0] == 'check':
                out = r.check(int(words[1]), int(words[2]))
            elif words == ['iter']:
                out = r.iterate()
            elif words == ['dump']:
                out = r.dump()
            elif words == ['dumpiter']:
                out = r.dumpiter()
            elif words == ['quit']:
                break
            else:
                out = f'error unknown command {line[:40]!r}'
        except (RuntimeError, shmkv.Error) as e:
            out = f'error {e}'.replace('\n', ' ')
        sys.stdout.write(out + '\n')
        sys.stdout.flush()
    if r.cache is not None:
        r.cache.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
