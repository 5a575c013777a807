"""Generations: attach to a cache served by shmkv-loader, refresh while
zero-copy values are held, use them after, and see the old segment unmapped
once the last of them goes."""
import gc
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
import shmkv


def wait_for(cond, seconds=60.0):
    end = time.monotonic() + seconds
    while True:
        v = cond()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.05)


def mapped_segments(shm):
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if shm in line}


def maps():
    """/proc/self/maps as (start, end, path or None); an unlinked file's path
    without its " (deleted)"."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip().removesuffix(" (deleted)") if len(parts) == 6 else None
            out.append((lo, hi, path))
    return out


def file_at(addr):
    """The file mapped at addr, or None."""
    return next((p for lo, hi, p in maps() if lo <= addr < hi), None)


def mappings_of(path):
    """How many mappings of path the process has."""
    return sum(p == path for _, _, p in maps())


@pytest.fixture
def served(tmp_path, loader):
    root, spool = tmp_path / "root", tmp_path / "spool"
    root.mkdir(mode=0o755)
    spool.mkdir(mode=0o755)
    shm = tempfile.mkdtemp(prefix="shmkv-py-", dir="/dev/shm")
    os.chmod(shm, 0o755)
    log = open(tmp_path / "loader.log", "w")
    proc = subprocess.Popen([loader, "--root", str(root), "--spool", str(spool), "--shm-dir", shm,
                             "--memory", "shm", "--foreground"], stderr=log)

    def publish(gen_records):
        tmp = tmp_path / "next.shmkv"
        shmkv.build(tmp, gen_records)
        os.rename(tmp, spool / "feat.shmkv")  # only a rename into the spool is picked up

    try:
        assert wait_for(lambda: (root / "control.sock").exists()), "the loader did not start"
        yield str(root), shm, publish
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(shm, ignore_errors=True)


def attach_when_ready(root):
    def try_attach():
        try:
            return shmkv.attach("feat", root=root)
        except (shmkv.CacheNotFound, shmkv.Unavailable):
            return None
    c = wait_for(try_attach)
    assert c is not None, "the cache was not published within 60 s"
    return c


def test_refresh_keeps_views(served):
    root, shm, publish = served
    publish([("v", np.full(128, 1.0, np.float32)), ("s", "one")])
    c = attach_when_ready(root)
    g1 = c.generation
    assert g1 >= 1 and c["s"] == "one" and c.refresh() is False
    v1 = c["v"]
    a1 = np.asarray(v1)
    it = iter(c.keys())  # an iterator reads the generation it started on
    seg1 = mapped_segments(shm)
    assert len(seg1) == 1
    publish([("v", np.full(128, 2.0, np.float32)), ("s", "two"), ("t", 3)])
    assert wait_for(lambda: c.refresh()), "no new generation within 60 s"
    assert c.generation > g1 and c["s"] == "two" and c["t"] == 3
    # the old values still read the old generation, which is still mapped
    assert (a1 == 1.0).all() and v1[127] == 1.0 and sorted(it) == ["s", "v"]
    assert mapped_segments(shm) > seg1
    v2 = c["v"]
    assert v2[0] == 2.0
    del v1, it
    gc.collect()
    assert seg1 <= mapped_segments(shm)  # a1 still holds it
    del a1
    gc.collect()
    assert not (seg1 & mapped_segments(shm)), "the old generation is still mapped"
    assert v2[0] == 2.0
    # RefreshEvery: one clock read between refreshes
    pol = shmkv.RefreshEvery(c, 0.05)
    publish([("s", "three")])
    assert wait_for(lambda: pol.maybe_refresh() or None)
    assert c["s"] == "three" and "v" not in c
    c.close()
    del v2
    gc.collect()
    assert not mapped_segments(shm)


def test_truncated_ctl_does_not_crash(served):
    """`truncate -s 0 ROOT/feat.ctl` under a reader: refresh() raises
    StaleCache (lib's fstat comes before the mapping is read), the values and
    the generation held still read; in a child, so a SIGBUS (what a direct
    read of the truncated mapping raises) shows as its exit status."""
    root, shm, publish = served
    publish([("s", "one")])
    attach_when_ready(root).close()
    code = f"""
import os, shmkv
c = shmkv.attach("feat", root={root!r})
v = c["s"]
os.truncate(os.path.join({root!r}, "feat.ctl"), 0)
for _ in range(2):  # and again: the cache never moves, never faults
    try:
        c.refresh()
        print("no error")
    except shmkv.StaleCache as e:
        print("stale", e.errname, c["s"], v)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"child exited {r.returncode} (-7: SIGBUS): {r.stderr}"
    assert r.stdout.split() == ["stale", "SHMKV_ESTALE", "one", "one"] * 2, r.stdout + r.stderr


def test_drop_and_reload_reported(served, shmctl):
    """`shmctl cache drop` then a new load: refresh() raises StaleCache (the
    loader retired the control segment before the drop) instead of serving
    the dropped generation as current; values held stay valid; a new
    attach() reads the reloaded cache."""
    root, shm, publish = served
    publish([("v", np.full(64, 1.0, np.float32)), ("s", "one")])
    c = attach_when_ready(root)
    v1 = c["v"]
    subprocess.run([shmctl, "-r", root, "cache", "drop", "feat"], check=True,
                   capture_output=True, timeout=120)
    publish([("s", "two")])
    with pytest.raises(shmkv.StaleCache) as e:
        c.refresh()
    assert e.value.errname == "SHMKV_ESTALE" and e.value.code == shmkv.StaleCache.code
    assert isinstance(e.value, shmkv.Error)
    assert c["s"] == "one" and v1[63] == 1.0  # still the generation it had
    with pytest.raises(shmkv.StaleCache):
        c.refresh()  # stays stale: attach again

    def reloaded():
        try:
            n = shmkv.attach("feat", root=root)
        except (shmkv.CacheNotFound, shmkv.Unavailable):
            return None
        if n.get("s") == "two":
            return n
        n.close()
        return None
    n = wait_for(reloaded)
    assert n is not None, "the reloaded cache was not served within 60 s"
    assert "v" not in n and n.refresh() is False
    n.close()
    c.close()


def test_changes_counted(served, shmctl):
    """A cache with changes (protocol 2: its base read through an overlay)
    counts, lists and reads what the changes left: len() is not the base's
    entry count."""
    root, shm, publish = served
    publish([("a", "1"), ("b", "2")])
    c = attach_when_ready(root)
    assert len(c) == 2
    for args in (["set", "feat", "c", "3"], ["set", "feat", "d", "4"], ["remove", "feat", "a"]):
        subprocess.run([shmctl, "-r", root, "cache", *args], check=True, capture_output=True,
                       timeout=120)
    with pytest.raises(shmkv.StaleCache):
        c.refresh()  # the first change retires the protocol 1 control segment
    c.close()
    n = shmkv.attach("feat", root=root)
    assert len(n) == 3 and sorted(n.keys()) == ["b", "c", "d"]
    assert n["c"] == "3" and "a" not in n
    n.close()


def test_refresh_keeps_base(served, shmctl):
    """Changes publish a new top overlay over the same base (lib/PROTOCOL.md,
    "Protocol 2"): each refresh maps that top alone, also while values of old
    generations live (lib shares the base's mapping with them), so the base
    stays where it was, mapped once; every value held reads what it read
    after many refreshes, and as the old generations go, in any order, their
    tops are unmapped."""
    root, shm, publish = served
    publish([(f"k{i}", np.full(16, float(i), np.float32), "f32list") for i in range(500)])
    c = attach_when_ready(root)

    def cache_set(key, value):
        subprocess.run([shmctl, "-r", root, "cache", "set", "feat", key, value, "--type", "f32list"],
                       check=True, capture_output=True, timeout=120)

    cache_set("w0", "[0, 0.5]")  # the first change: a protocol 2 control segment
    with pytest.raises(shmkv.StaleCache):
        c.refresh()
    c.close()
    c = shmkv.attach("feat", root=root)
    base_at = c.mapping[0]
    base = file_at(base_at)
    assert base and base.startswith(shm), base
    held = [(c["k7"], 7.0), (c["w0"], 0.0)]  # zero-copy: they hold their generation
    tops = set()
    for i in range(1, 31):
        cache_set(f"w{i}", f"[{i}, 0.5]")
        assert wait_for(lambda: c.refresh()), "no new generation within 60 s"
        assert c.mapping[0] == base_at, f"refresh {i} mapped the base anew"
        assert mappings_of(base) == 1, f"refresh {i}: the base mapped again"
        w = c[f"w{i}"]
        tops.add(file_at(np.asarray(w).ctypes.data))
        held += [(w, float(i)), (c[f"k{i}"], float(i))]
        # the first generation's values still read what they read
        assert held[0][0][15] == 7.0 and held[1][0][0] == 0.0 and held[1][0][1] == 0.5
    assert len(tops) == 30 and all(t and t.startswith(shm) for t in tops), tops
    assert all(mappings_of(t) == 1 for t in tops), "a held generation's top is unmapped"
    for a, want in held:
        assert a[0] == want
    random.Random(7).shuffle(held)
    while held:
        del held[-1]
        gc.collect()
        for a, want in held[-3:]:
            assert a[0] == want
        assert mappings_of(base) == 1
    del a, w  # the last values the loops bound
    gc.collect()
    now = file_at(np.asarray(c["w30"]).ctypes.data)
    assert [t for t in tops if mappings_of(t)] == [now], "old tops stay mapped"
    assert c.mapping[0] == base_at and c["k3"][0] == 3.0
    c.close()
    gc.collect()
    assert mappings_of(base) == 0 and mappings_of(now) == 0
