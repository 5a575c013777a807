#!/usr/bin/env python3
"""bench/python/loop.py - one loop of lookups, for counting instructions a
lookup under valgrind (bench/RESULTS.md, Python, "Instructions a hit").

Usage: loop.py SYSTEM KEYS PASSES DIR
  DIR holds bench.shmkv (key_N -> val_N, N < KEYS) and, for axon*, AxonCache's
  bench_cache.TS.cache (bench/python/lookup.py's build_axon writes both; see
  --make). 100,000 uniform keys (hits: key_N, N < KEYS; misses: N >= KEYS),
  looked up PASSES times over. The difference of two counts (PASSES 3 and 1)
  over 200,000 is the instructions of one iteration; `none` is the loop alone.
SYSTEM: none, dict, shmkv (cache[k]), shmkv-get (cache.get(k)), shmkv-miss
  (cache.get(k), absent keys), shmkv-in (k in cache), axon (Reader.get_key),
  axon-miss (Reader.contains_key, absent keys).
loop.py --make KEYS DIR: writes DIR's two images."""
import glob
import os
import random
import sys

M = 100_000


def main():
    if sys.argv[1] == "--make":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import lookup
        n, d = int(sys.argv[2]), sys.argv[3]
        os.makedirs(d, exist_ok=True)
        lookup.build_shmkv(n, os.path.join(d, "bench.shmkv"))
        lookup.build_axon(n, d)
        return
    system, n, passes, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rnd = random.Random(1)
    hits1 = [f"key_{rnd.randrange(n)}" for _ in range(M)]
    miss1 = [f"key_{n + rnd.randrange(n)}" for _ in range(M)]
    hits, miss = hits1 * passes, miss1 * passes
    if system.startswith("shmkv"):
        import shmkv
        c = shmkv.open(os.path.join(d, "bench.shmkv"))
        if system == "shmkv":
            for k in hits:
                c[k]
        elif system == "shmkv-get":
            g = c.get
            for k in hits:
                g(k)
        elif system == "shmkv-miss":
            g = c.get
            for k in miss:
                g(k)
        elif system == "shmkv-in":
            for k in hits:
                k in c
    elif system.startswith("axon"):
        import axoncache
        ts = os.path.basename(glob.glob(os.path.join(d, "bench_cache.*.cache"))[0]).split(".")[1]
        r = axoncache.Reader()
        r.update("bench_cache", d, ts)
        bh = [k.encode() for k in hits1] * passes
        bm = [k.encode() for k in miss1] * passes
        if system == "axon":
            g = r.get_key
            for k in bh:
                g(k)
        else:
            g = r.contains_key
            for k in bm:
                g(k)
    elif system == "dict":
        dd = {f"key_{i}": f"val_{i}" for i in range(n)}
        for k in hits:
            dd[k]
    elif system == "none":
        for k in hits:
            pass


if __name__ == "__main__":
    main()
