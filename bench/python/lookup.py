#!/usr/bin/env python3
"""bench/python/lookup.py - shmkv's Python reads against a dict and
AxonCache's Python module (bench/README.md; bench/peers runs it).

Data: N records key_%d -> val_%d. Streams of --lookups keys, uniform over
[0, N) (hits) and over [N, 2N) (misses), made before any timing: str objects
for shmkv and the dict (new objects, not the dict's own keys), bytes for
AxonCache (its get_key takes only bytes). Systems, timed in rounds, the
order rotating each round (interleaved); the median over rounds is printed,
in ns of the thread's CPU time per lookup:

  dict        d[k] (hits), d.get(k) (misses), k in d (misses: "in")
  shmkv       cache[k] (hits), cache.get(k) (misses), k in cache (misses: "in",
              the call that matches AxonCache's contains_key)
  shmkv-many  cache.get_many(batch of 64 keys), per key
  axoncache   Reader.get_key(k) (hits), Reader.contains_key(k) (misses: get_key
              raises there)

--raising adds the stream "raise" to dict, shmkv and axoncache: the same
lookup call as for hits, on the first tenth of the miss stream, each raising
and caught (KeyError; AxonCache's NotFoundError), for the literal "cache[k]
on a missing key" against AxonCache's get_key on one.

Usage: lookup.py --keys 1000000 [--lookups 1000000] [--rounds 7]
                 [--dir DIR | --work DIR [--build-only] | --image PATH |
                  --attach NAME --root DIR] [--axon [--axon-dir DIR]] [--hugepages]
                 [--systems dict,shmkv,...] [--raising] [--json FILE]

--image PATH reads that image (key_N -> val_N, N < --keys) instead of
building one; --attach NAME --root DIR reads cache NAME of the shmkv-loader
serving DIR (its memory: hugetlb pages where it has them). --axon-dir DIR:
where AxonCache's cache is written (made there when absent). --json FILE
also writes every round's figure there.

--work DIR keeps the images in DIR (made there when absent: bench.shmkv, and
AxonCache's bench_cache.TS.cache with --axon), so that a timed run under a
lock does not hold it while they are built: `lookup.py --work D --keys N
--axon --build-only` first, then the timed runs with the same --work.
"""
import argparse
import gc
import glob
import os
import random
import statistics
import sys
import tempfile
import time

import shmkv


def build_shmkv(n, path):
    t = time.perf_counter()
    shmkv.build(path, ((f"key_{i}", f"val_{i}") for i in range(n)), created=1700000000)
    return time.perf_counter() - t


def open_axon(d, ts):
    import axoncache
    r = axoncache.Reader()
    r.update("bench_cache", d, ts)
    return r


def build_axon(n, d):
    import axoncache
    props = os.path.join(d, "bench.properties")
    with open(props, "w") as f:
        f.write(f"ccache.destination_folder={d}\n")
    t = time.perf_counter()
    w = axoncache.Writer("bench_cache", props, 2 * n)
    for i in range(n):
        w.insert_key(f"key_{i}".encode(), f"val_{i}".encode(), 0)
    ts = w.finish_cache_creation()
    w.close()
    took = time.perf_counter() - t
    # the reader opens TASK.TIMESTAMP.cache; this writer leaves TASK.cache
    named = os.path.join(d, f"bench_cache.{ts}.cache")
    if not os.path.exists(named):
        os.rename(os.path.join(d, "bench_cache.cache"), named)
    return open_axon(d, ts), took


def timed(fn, n):
    # the thread's CPU time, not the wall clock: on a shared, loaded machine
    # the wall clock counts other processes' time slices too
    gc.disable()
    t = time.thread_time_ns()
    fn()
    took = time.thread_time_ns() - t
    gc.enable()
    return took / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--axon", action="store_true", help="also AxonCache's module")
    ap.add_argument("--hugepages", action="store_true",
                    help="open the shmkv image with hugepages=True (an image on tmpfs: --dir /dev/shm)")
    ap.add_argument("--systems", default="dict,shmkv,shmkv-many")
    ap.add_argument("--work", default=None,
                    help="keep the images in this directory, made there when absent")
    ap.add_argument("--build-only", action="store_true",
                    help="with --work: make the images, time nothing")
    ap.add_argument("--image", default=None, help="read this image, built elsewhere")
    ap.add_argument("--attach", default=None, help="read this cache of a loader (--root)")
    ap.add_argument("--root", default=None, help="the loader's root, with --attach")
    ap.add_argument("--axon-dir", default=None, help="AxonCache's cache directory")
    ap.add_argument("--json", default=None, help="also write the rounds' figures here")
    ap.add_argument("--raising", action="store_true",
                    help="also time the hit call on absent keys, raising (a tenth of the misses)")
    a = ap.parse_args()
    systems = a.systems.split(",") + (["axoncache"] if a.axon else [])
    n, m = a.keys, a.lookups
    if a.work:
        work = a.work
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="shmkv-pybench-", dir=a.dir)
    rnd = random.Random(1)
    path = a.image or os.path.join(work, "bench.shmkv")
    print(f"# keys {n}, lookups {m}, rounds {a.rounds}, python {sys.version.split()[0]}, "
          f"shmkv vector {shmkv.VECTOR}", flush=True)
    if not (a.image or a.attach or (a.work and os.path.exists(path))):
        print(f"# build shmkv {build_shmkv(n, path):.1f} s", flush=True)
    axon = None
    if "axoncache" in systems:
        adir = a.axon_dir or work
        os.makedirs(adir, exist_ok=True)
        made = glob.glob(os.path.join(adir, "bench_cache.*.cache")) if a.work or a.axon_dir else []
        if made:
            axon = open_axon(adir, os.path.basename(made[0]).split(".")[1])
        else:
            axon, took = build_axon(n, adir)
            print(f"# build axoncache {took:.1f} s", flush=True)
    if a.build_only:
        return
    if a.attach:
        cache = shmkv.attach(a.attach, a.root)
    else:
        cache = shmkv.open(path, populate=True, hugepages=a.hugepages)
    if len(cache) != n:
        sys.exit(f"lookup.py: {path} holds {len(cache)} keys, not --keys {n}")
    d = {f"key_{i}": f"val_{i}" for i in range(n)} if "dict" in systems else None
    hits = [f"key_{rnd.randrange(n)}" for _ in range(m)]
    miss = [f"key_{n + rnd.randrange(n)}" for _ in range(m)]
    bhits = [k.encode() for k in hits]
    bmiss = [k.encode() for k in miss]
    batches = [hits[i:i + 64] for i in range(0, m - 63, 64)]
    for k in hits[:3] + miss[:3]:  # the same answers everywhere
        want = d.get(k) if d is not None else None
        assert cache.get(k) == (want if d is not None else cache.get(k))
        if axon is not None:
            want = cache.get(k)
            if want is None:
                assert not axon.contains_key(k.encode())
            else:
                assert axon.get_key(k.encode()) == want.encode()

    def run_dict_hit():
        for k in hits:
            d[k]

    def run_dict_miss():
        g = d.get
        for k in miss:
            g(k)

    def run_shmkv_hit():
        for k in hits:
            cache[k]

    def run_shmkv_miss():
        g = cache.get
        for k in miss:
            g(k)

    def run_dict_in():
        for k in miss:
            k in d

    def run_shmkv_in():
        for k in miss:
            k in cache

    def run_many():
        g = cache.get_many
        for b in batches:
            g(b)

    def run_axon_hit():
        g = axon.get_key
        for k in bhits:
            g(k)

    def run_axon_miss():
        # get_key raises NotFoundError for an absent key: the miss stream
        # uses contains_key, its cheaper call (no exception)
        g = axon.contains_key
        for k in bmiss:
            g(k)

    rmiss = miss[:max(1, m // 10)]
    brmiss = bmiss[:len(rmiss)]

    def run_dict_raise():
        for k in rmiss:
            try:
                d[k]
            except KeyError:
                pass

    def run_shmkv_raise():
        for k in rmiss:
            try:
                cache[k]
            except KeyError:
                pass

    def run_axon_raise():
        import axoncache
        g = axon.get_key
        for k in brmiss:
            try:
                g(k)
            except axoncache.NotFoundError:
                pass

    cases = {"dict": [("hit", run_dict_hit, m), ("miss", run_dict_miss, m),
                      ("in", run_dict_in, m)],
             "shmkv": [("hit", run_shmkv_hit, m), ("miss", run_shmkv_miss, m),
                       ("in", run_shmkv_in, m)],
             "shmkv-many": [("hit", run_many, len(batches) * 64)],
             "axoncache": [("hit", run_axon_hit, m), ("miss", run_axon_miss, m)]}
    if a.raising:
        for s_, fn in (("dict", run_dict_raise), ("shmkv", run_shmkv_raise),
                       ("axoncache", run_axon_raise)):
            cases[s_].append(("raise", fn, len(rmiss)))
    for s in systems:  # one warm-up pass each
        for _, fn, k in cases[s]:
            fn()
    res = {}
    for r in range(a.rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for s in order:
            for what, fn, k in cases[s]:
                res.setdefault((s, what), []).append(timed(fn, k))
    print(f"{'system':<12} {'stream':<6} {'ns/lookup (median)':>20} {'min':>8} {'max':>8}")
    for (s, what), v in res.items():
        print(f"{s:<12} {what:<6} {statistics.median(v):>20.1f} {min(v):>8.1f} {max(v):>8.1f}")
    med = {k: statistics.median(v) for k, v in res.items()}
    if "dict" in systems:
        for what in ("hit", "miss", "in") + (("raise",) if a.raising else ()):
            print(f"# shmkv/dict {what}: {med[('shmkv', what)] / med[('dict', what)]:.2f}x")
    if "axoncache" in systems:
        for what in ("hit", "miss") + (("raise",) if a.raising else ()):
            print(f"# shmkv/axoncache {what}: "
                  f"{med[('shmkv', what)] / med[('axoncache', what)]:.2f}x")
        # absent keys, membership against membership: k in cache / contains_key
        print(f"# shmkv/axoncache in: {med[('shmkv', 'in')] / med[('axoncache', 'miss')]:.2f}x")
    if a.json:
        import json
        with open(a.json, "w") as f:
            json.dump({"keys": n, "python": sys.version.split()[0],
                       "load_end": os.getloadavg()[0],
                       "rows": [{"system": s, "stream": what, "ns": v}
                                for (s, what), v in res.items()]}, f, indent=1)
    cache.close()
    if not a.work:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
