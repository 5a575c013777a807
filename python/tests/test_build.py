"""Building: byte-identical to `shmctl image build`, bad records, partitioned
builds and join, part_of."""
import errno
import json
import os
import subprocess

import numpy as np
import pytest
import shmkv

from conftest import sample_records

CREATED = 1700000000


def records(n=3000):
    out = []
    for i in range(n):
        m = i % 6
        k = f"key_{i}"
        if m == 0:
            out.append({"key": k, "value": f"val_{i}"})
        elif m == 1:
            out.append({"key": k, "value": i * 7 - 5000})
        elif m == 2:
            out.append({"key": k, "value": [i / 4, 0.5], "type": "f32list"})
        elif m == 3:
            out.append({"key": k, "value": ["x", str(i % 5)]})
        elif m == 4:
            out.append({"key": k, "value": [i, -i]})
        else:
            out.append({"key": k, "value": i % 3 == 0})
    out.append({"key": "shared1", "value": "the same long value " * 4})
    out.append({"key": "shared2", "value": "the same long value " * 4})
    return out


def jsonl(path, recs):
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")


def test_same_bytes_as_shmctl(tmp_path, shmctl):
    recs = records()
    jsonl(tmp_path / "in.jsonl", recs)
    subprocess.run([shmctl, "image", "build", "-o", str(tmp_path / "c.shmkv"), "--created",
                    str(CREATED), "--name", "t", str(tmp_path / "in.jsonl")], check=True,
                   stdout=subprocess.DEVNULL)
    shmkv.build(tmp_path / "p.shmkv", recs, created=CREATED, name="t")
    assert (tmp_path / "p.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    # tuples, build_file and the options (seed, buckets, on_duplicate) too
    subprocess.run([shmctl, "image", "build", "-o", str(tmp_path / "c2.shmkv"), "--created",
                    str(CREATED), "--seed", "7", "--buckets", "999", "--on-duplicate", "last",
                    str(tmp_path / "in.jsonl"), str(tmp_path / "in.jsonl")], check=True,
                   stdout=subprocess.DEVNULL)
    tup = [(r["key"], r["value"], r.get("type")) for r in recs]
    st = shmkv.build(tmp_path / "p2.shmkv", tup + tup, created=CREATED, seed=7, buckets=999,
                     on_duplicate="last")
    assert st["duplicates"] == len(recs)
    assert (tmp_path / "p2.shmkv").read_bytes() == (tmp_path / "c2.shmkv").read_bytes()
    shmkv.build_file(tmp_path / "f.shmkv", tmp_path / "in.jsonl", created=CREATED, name="t")
    assert (tmp_path / "f.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()


def test_build_file_equals_build(tmp_path):
    recs = records(600)
    jsonl(tmp_path / "in.jsonl", recs)
    shmkv.build_file(tmp_path / "f.shmkv", [tmp_path / "in.jsonl"], created=CREATED)
    shmkv.build(tmp_path / "p.shmkv", iter(recs), created=CREATED, threads=1)
    assert (tmp_path / "p.shmkv").read_bytes() == (tmp_path / "f.shmkv").read_bytes()
    c = shmkv.open(tmp_path / "p.shmkv")
    assert c["key_0"] == "val_0" and c["key_1"] == -4993 and c["key_2"].tolist() == [0.5, 0.5]


def test_numpy_and_types(tmp_path):
    p = tmp_path / "n.shmkv"
    shmkv.build(p, [("a", np.array([1.5, 2], np.float64)), ("b", np.array([3, 4], np.int64)),
                    ("c", np.array([0.25], np.float32)), ("d", 3, "f64"),
                    ("e", [1, 2], "f32list"), ("g", b"raw"), ("h", bytearray(b"r2")),
                    ("i", np.int64(5)), ("j", np.float32(0.5))])
    c = shmkv.open(p)
    assert c.get_f64list("a").tolist() == [1.5, 2.0] and c.get_i64list("b").tolist() == [3, 4]
    assert c.get_f32list("c").tolist() == [0.25] and c.get_f64("d") == 3.0
    assert c.get_f32list("e").tolist() == [1.0, 2.0] and c["g"] == b"raw" and c["h"] == b"r2"
    assert c.get_i64("i") == 5 and c.get_f64("j") == 0.5
    # an array of another element type converts element by element, without loss
    shmkv.build(tmp_path / "m.shmkv", [("a", np.array([0.5, 0.25]), "f32list"),
                                       ("b", np.array([1, 2], np.int32), "i64list")])
    c = shmkv.open(tmp_path / "m.shmkv")
    assert c.get_f32list("a").tolist() == [0.5, 0.25] and c.get_i64list("b").tolist() == [1, 2]
    with pytest.raises(shmkv.BuildError):
        shmkv.build(tmp_path / "x.shmkv", [("a", np.array([0.1]), "f32list")])


@pytest.mark.parametrize("bad,index,what", [
    ([("a", 1), ("b", {"x": 1})], 1, "a value of type dict"),
    ([("a", 1), ("b", 2), ("c",)], 2, "a record is (key, value)"),
    ([("a", 1), (5, 2)], 1, "a key is str or bytes-like"),
    ([("a", 1), ("b", [])], 1, "empty or mixes"),
    ([("a", 1), ("b", 0.1, "f32list")], 1, "a float for a f32list"),
    ([("a", [0.1], "f32list")], 0, "not exact in f32"),
    ([("a", 1), ("b", 2 ** 64)], 1, "outside the i64 range"),
    ([("a", 1), ("b", 2 ** 53 + 1, "f64")], 1, "not exact in f64"),
    ([("a", 1), ("b", "x", "nosuchtype")], 1, "not a value type"),
    ([("a", 1), ("k" * 70000, 1)], 1, "key"),
    ([("a", 1), "just a string"], 1, "a record is a (key, value) pair"),
])
def test_bad_records(tmp_path, bad, index, what):
    out = tmp_path / "out.shmkv"
    with pytest.raises(shmkv.BuildError) as e:
        shmkv.build(out, bad)
    assert isinstance(e.value, ValueError)
    assert e.value.index == index
    assert f"record #{index + 1} (index {index})" in str(e.value)
    assert what in str(e.value), str(e.value)
    assert os.listdir(tmp_path) == []  # nothing left behind


def test_duplicates_and_old_output_kept(tmp_path):
    out = tmp_path / "out.shmkv"
    out.write_bytes(b"old")
    with pytest.raises(shmkv.DuplicateKey) as e:
        shmkv.build(out, [("a", 1), ("b", 2), ("a", 3)])
    assert "record #3" in str(e.value) and "record #1" in str(e.value)
    assert out.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["out.shmkv"]
    def gen():
        yield ("a", 1)
        raise RuntimeError("the source failed")
    with pytest.raises(RuntimeError):
        shmkv.build(out, gen())
    assert out.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["out.shmkv"]


def test_parts_and_join(tmp_path):
    recs = records(2000)
    B, N = 1000, 4
    shmkv.build(tmp_path / "one.shmkv", recs, created=CREATED, buckets=B)
    parts = {k: [] for k in range(1, N + 1)}
    for r in recs:
        parts[shmkv.part_of(r["key"], B, N)].append(r)
    frags = []
    for k in range(1, N + 1):
        f = tmp_path / f"frag{k}.shmkv"
        shmkv.build(f, parts[k], created=CREATED, buckets=B, part=(k, N))
        frags.append(f)
    shmkv.join(tmp_path / "all.shmkv", frags)
    assert (tmp_path / "all.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
    # a record of another part is refused (filter_part skips it), fragments out of order fail
    with pytest.raises(shmkv.BuildError):
        shmkv.build(tmp_path / "x.shmkv", recs, created=CREATED, buckets=B, part=(1, N))
    shmkv.build(tmp_path / "x.shmkv", recs, created=CREATED, buckets=B, part=(1, N),
                filter_part=True)
    assert (tmp_path / "x.shmkv").read_bytes() == frags[0].read_bytes()
    with pytest.raises(shmkv.BuildError) as e:
        shmkv.join(tmp_path / "bad.shmkv", frags[::-1])
    assert "part order" in str(e.value)
    assert not (tmp_path / "bad.shmkv").exists()
    # a missing fragment, a damaged one: the error names it, nothing is left
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(shmkv.OSFailure) as e:
        shmkv.join(tmp_path / "bad.shmkv", [frags[0], tmp_path / "gone.shmkv", *frags[2:]])
    assert e.value.errno == errno.ENOENT and "gone.shmkv" in str(e.value)
    img = bytearray(frags[1].read_bytes())
    img[-100] ^= 0x40
    (tmp_path / "damaged.shmkv").write_bytes(bytes(img))
    with pytest.raises(shmkv.CorruptImage) as e:
        shmkv.join(tmp_path / "bad.shmkv", [frags[0], tmp_path / "damaged.shmkv", *frags[2:]])
    assert "damaged.shmkv: " in str(e.value)
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["damaged.shmkv"])
    with pytest.raises(ValueError):
        shmkv.build(tmp_path / "y.shmkv", recs, part=(1, N))  # part needs buckets


def test_sample_records_roundtrip(tmp_path):
    shmkv.build(tmp_path / "s.shmkv", sample_records())
    assert len(shmkv.open(tmp_path / "s.shmkv")) == len(sample_records())


def test_errors_name_their_file_once(tmp_path):
    """A build error names the file it is about once: the builder's message
    says "in.jsonl:2: ..." itself, the package adds no second copy."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "a", "value": 1}\n{"key": "b",\n')
    out = tmp_path / "out.shmkv"
    with pytest.raises(shmkv.BuildError) as e:
        shmkv.build_file(out, bad)
    msg = str(e.value)
    assert msg.count(str(bad)) == 1 and f"{bad}:2: " in msg, msg
    gone = tmp_path / "gone.jsonl"
    with pytest.raises(shmkv.OSFailure) as e:
        shmkv.build_file(out, gone)
    assert str(e.value).count(str(gone)) == 1 and e.value.errno == errno.ENOENT, str(e.value)
    with pytest.raises(shmkv.OSFailure) as e:  # the output (and its missing directory)
        shmkv.build(tmp_path / "no" / "out.shmkv", [("a", 1)])
    assert str(e.value).count("out.shmkv") == 1, str(e.value)
    frag = tmp_path / "frag.shmkv"
    frag.write_bytes(b"not an image" * 400)
    with pytest.raises(shmkv.CorruptImage) as e:
        shmkv.join(out, [frag])
    assert str(e.value).count(str(frag)) == 1, str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl", "frag.shmkv"]
