"""Forged and damaged images raise shmkv.Error, never crash the interpreter:
the fuzz regressions (tests/fuzz/regress), the generated seed corpus
($SHMKV_FUZZ_CORPUS) and mutations of real images, each opened with and
without checksums, iterated, looked up (single and batched) and read through
every typed getter, in a child interpreter (a crash fails the test)."""
import os
import subprocess
import sys

import pytest
import shmkv

from conftest import TREE, sample_records

CHILD = r'''
import os, random, sys
import shmkv

def exercise(path):
    for verify in (True, False):
        try:
            c = shmkv.open(path, verify=verify)
        except shmkv.Error:
            continue
        keys = []
        try:
            for k, v in c.items():
                keys.append(k)
                if isinstance(v, shmkv.Array):
                    bytes(memoryview(v)); v.tolist()
        except shmkv.Error:
            pass
        keys += [b"", b"nope", "s", "F", b"\xff" * 300]
        try:
            c.get_many(keys, default=None)
        except shmkv.Error:
            pass
        for k in keys:
            for g in ("__getitem__", "get_str", "get_bytes", "get_i64", "get_f64", "get_bool",
                      "get_f32list", "get_f64list", "get_i64list", "get_strlist"):
                try:
                    v = getattr(c, g)(k)
                    if isinstance(v, shmkv.Array):
                        v.tolist()
                except (shmkv.Error, KeyError, TypeError):
                    pass
        c.close()

n = 0
for path in sys.argv[1:]:
    exercise(path)
    n += 1
print("exercised", n)
'''


def mutations(src, out_dir, count=150):
    import random
    rnd = random.Random(23)
    data = src.read_bytes()
    out = []
    for i in range(count):
        b = bytearray(data)
        kind = i % 3
        if kind == 0:  # flip bytes anywhere
            for _ in range(rnd.randint(1, 8)):
                b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        elif kind == 1:  # truncate
            b = b[:rnd.randrange(len(b))]
        else:  # overwrite a 64-bit word with a large or odd value
            p = rnd.randrange(0, len(b) - 8) & ~7
            b[p:p + 8] = rnd.choice([2 ** 63, 2 ** 64 - 1, 4096, 7, 0]).to_bytes(8, "little")
        f = out_dir / f"m{i}.shmkv"
        f.write_bytes(bytes(b))
        out.append(str(f))
    return out


def test_forged_images(tmp_path):
    src = tmp_path / "real.shmkv"
    shmkv.build(src, sample_records() + [(f"k{i}", f"v{i}" * (i % 9)) for i in range(300)])
    inputs = mutations(src, tmp_path)
    regress = os.path.join(TREE, "tests", "fuzz", "regress")
    for d in ("image", "image_fixsum"):
        dd = os.path.join(regress, d)
        inputs += [os.path.join(dd, f) for f in sorted(os.listdir(dd))] if os.path.isdir(dd) else []
    corpus = os.environ.get("SHMKV_FUZZ_CORPUS")
    if corpus:
        inputs += [os.path.join(corpus, f) for f in sorted(os.listdir(corpus))]
    elif os.environ.get("SHMKV_REQUIRE_ALL") == "1":
        pytest.fail("$SHMKV_FUZZ_CORPUS is not set (./run test sets it)")
    assert len(inputs) >= 150
    r = subprocess.run([sys.executable, "-c", CHILD] + inputs, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, f"the interpreter died ({r.returncode}): {r.stderr[-2000:]}"
    assert f"exercised {len(inputs)}" in r.stdout
