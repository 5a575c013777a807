"""Format 2 and expiry (lib/FORMAT.md §17): build(format=2), per-record
expiry (int, aware datetime, expires=), reading v2 images (every type,
get_many, iteration, zero-copy), expired entries absent, Cache.expires and
Cache.format, join and build_file of v2, the same bytes as shmctl. Expiry
times are relative to time.time(): the package does not pin lib's clock."""
import datetime
import json
import subprocess
import time

import numpy as np
import pytest
import shmkv

from conftest import SAMPLE, sample_records

CREATED = 1700000000
UTC = datetime.timezone.utc


def now():
    return int(time.time())


def plain(v):
    return v.tolist() if isinstance(v, shmkv.Array) else v


@pytest.mark.parametrize("fmt", [1, 2])
def test_every_type_in_each_format(tmp_path, fmt):
    p = tmp_path / "t.shmkv"
    vec = np.arange(128, dtype=np.float32)
    shmkv.build(p, sample_records() + [("vec128", vec)], created=CREATED, format=fmt)
    with shmkv.open(p, deep=True) as c:
        assert c.format == fmt
        assert len(c) == len(SAMPLE) + 1
        for k, v in SAMPLE:
            assert plain(c[k]) == v, k
            assert c.expires(k) is None
        assert c.get_str("s") == "héllo" and c.get_bytes("b") == b"\x00\xffbytes"
        assert c.get_i64("i") == -42 and c.get_f64("f") == 2.5 and c.get_bool("t") is True
        assert c.get_f32list("F").tolist() == [0.5, 1.25, -2.0]
        assert c.get_f64list("D").tolist() == [1.5, 2.0, 3.25]
        assert c.get_i64list("I").tolist() == [1, -2, 3] and c.get_strlist("S") == ["a", "", "ü"]
        with pytest.raises(shmkv.TypeMismatch):
            c.get_i64("s")
        keys = [k for k, _ in SAMPLE] + ["nope", "vec128"]
        got = c.get_many(keys, default="X")
        assert [plain(g) for g in got[:len(SAMPLE)]] == [v for _, v in SAMPLE]
        assert got[len(SAMPLE)] == "X" and got[-1].tolist() == vec.tolist()
        items = {k: plain(v) for k, v in c.items()}
        assert items == dict(SAMPLE, vec128=vec.tolist())
        # zero-copy: the 128 floats lie inside the image's mapping
        v = c["vec128"]
        base, size = c.mapping
        assert base <= v.address and v.address + v.nbytes <= base + size
        a = np.asarray(v)
        assert a.ctypes.data == v.address and not a.flags.writeable
        out = np.zeros((2, 128), np.float32)
        assert c.get_many(["vec128", "nope"], out=out) == [1]
        assert out[0].tolist() == vec.tolist()


def shmctl_build(shmctl, jsonl, out, recs, fmt):
    """recs written to jsonl as JSON lines, built by shmctl into out in format fmt."""
    with open(jsonl, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    subprocess.run([shmctl, "image", "build", "--format", str(fmt), "-o", str(out),
                    "--created", str(CREATED), str(jsonl)], check=True,
                   stdout=subprocess.DEVNULL)


def test_same_bytes_as_shmctl_with_expiry(tmp_path, shmctl):
    t = now() + 86400
    recs = [{"key": f"k{i}", "value": f"v{i}", "expires": t + i} for i in range(200)]
    recs += [{"key": "never", "value": [1, 2]}]
    shmctl_build(shmctl, tmp_path / "in.jsonl", tmp_path / "c.shmkv", recs, 2)
    shmkv.build(tmp_path / "p.shmkv", recs, created=CREATED, format=2)
    assert (tmp_path / "p.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    # tuples with datetimes, and build_file, give the same bytes
    tup = [(r["key"], r["value"], None,
            datetime.datetime.fromtimestamp(r["expires"], UTC) if "expires" in r else None)
           for r in recs]
    shmkv.build(tmp_path / "d.shmkv", tup, created=CREATED, format=2)
    assert (tmp_path / "d.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    shmkv.build_file(tmp_path / "f.shmkv", tmp_path / "in.jsonl", created=CREATED, format=2)
    assert (tmp_path / "f.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    # format 2 is the builder's default; format=1 writes v1, as shmctl --format 1
    plainrecs = [{"key": r["key"], "value": r["value"]} for r in recs]
    shmctl_build(shmctl, tmp_path / "plain.jsonl", tmp_path / "c1.shmkv", plainrecs, 1)
    shmkv.build(tmp_path / "p1.shmkv", plainrecs, created=CREATED, format=1)
    shmkv.build(tmp_path / "p2.shmkv", plainrecs, created=CREATED, format=2)
    shmkv.build(tmp_path / "p0.shmkv", plainrecs, created=CREATED)
    assert (tmp_path / "p1.shmkv").read_bytes() == (tmp_path / "c1.shmkv").read_bytes()
    assert (tmp_path / "p2.shmkv").read_bytes() == (tmp_path / "p0.shmkv").read_bytes()
    assert shmkv.open(tmp_path / "p1.shmkv").format == 1
    assert shmkv.open(tmp_path / "p0.shmkv").format == 2


def test_expired_entries_are_absent(tmp_path):
    p = tmp_path / "e.shmkv"
    past, future = now() - 3600, now() + 3600
    shmkv.build(p, [("dead", "x", None, past), ("live", [1.5, 2.5], "f32list", future),
                    {"key": "never", "value": 7}, {"key": "gone", "value": [1, 2],
                                                   "expires": past}],
                created=CREATED, format=2)
    c = shmkv.open(p)
    assert c.format == 2 and len(c) == 4  # len counts stored entries, expired ones too
    for k in ("dead", "gone"):
        with pytest.raises(shmkv.NotFound) as e:
            c[k]
        assert isinstance(e.value, KeyError) and e.value.args[0] == k
        assert "expired" in str(e.value) and "expired" in e.value.reason
        assert e.value.expires == past
        assert k not in c and c.get(k) is None and c.get(k, 5) == 5
        with pytest.raises(shmkv.NotFound, match="expired"):
            c.get_str(k) if k == "dead" else c.get_i64list(k)
        assert c.expires(k) == past  # the time stays readable
    with pytest.raises(shmkv.NotFound) as e:
        c["nope"]
    assert e.value.args == ("nope",) and "expired" not in str(e.value)
    assert e.value.expires is None
    with pytest.raises(shmkv.NotFound):
        c.expires("nope")
    assert c["live"].tolist() == [1.5, 2.5] and c["never"] == 7
    assert c.expires("live") == future and c.expires("never") is None
    assert c.get_many(["dead", "live", "gone", "never"], default=0)[::2] == [0, 0]
    assert sorted(c) == ["live", "never"]
    assert sorted(k for k, _ in c.items()) == ["live", "never"]
    assert sorted(plain(v) for v in c.values() if not isinstance(v, shmkv.Array)) == [7]
    out = np.zeros((3, 2), np.float32)
    assert c.get_many(["gone", "live", "dead"], out=out) == [0, 2]


def test_entry_expires_while_open(tmp_path):
    """An entry live at open is absent once the clock reaches its expiry
    (now >= expires), for every read path."""
    p = tmp_path / "soon.shmkv"
    t = now() + 3
    shmkv.build(p, [("soon", "x"), ("stay", "y", None, t + 3600)], created=CREATED, format=2,
                expires=t)
    c = shmkv.open(p)
    if time.time() < t - 0.5:  # the build ran in time (a loaded machine may be slower)
        assert c["soon"] == "x" and "soon" in c and sorted(c) == ["soon", "stay"]
    deadline = time.monotonic() + 60
    while time.time() < t and time.monotonic() < deadline:
        time.sleep(0.1)
    assert time.time() >= t
    assert "soon" not in c and c.get_many(["soon"]) == [None] and sorted(c) == ["stay"]
    with pytest.raises(shmkv.NotFound, match=f"expired at {t}"):
        c["soon"]
    assert c.expires("soon") == t and c["stay"] == "y"


def test_expiry_kinds(tmp_path):
    p = tmp_path / "k.shmkv"
    base = now() + 86400
    aware = datetime.datetime.fromtimestamp(base, UTC).replace(microsecond=250000)
    tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    shmkv.build(p, [("int", 1, None, base), ("frac", 2, None, aware),
                    ("zone", 3, None, datetime.datetime.fromtimestamp(base, tz)),
                    ("own_none", 4, None, None), {"key": "default", "value": 5},
                    ("max", 6, None, 2**32 - 1)],
                created=CREATED, format=2, expires=base + 7)
    c = shmkv.open(p)
    assert c.expires("int") == base
    assert c.expires("frac") == base + 1  # a fraction of a second rounds up
    assert c.expires("zone") == base
    assert c.expires("own_none") is None  # a record's own None wins over expires=
    assert c.expires("default") == base + 7
    assert c.expires("max") == 2**32 - 1 and c["max"] == 6


@pytest.mark.parametrize("exp, what", [
    (datetime.datetime(2030, 1, 1), "naive datetime"),
    (0, "outside"), (-5, "outside"), (2**32, "outside"), (2**70, "outside"),
    (datetime.datetime(1960, 1, 1, tzinfo=UTC), "outside"),
    (1.5e9, "float"), ("2030-01-01T00:00:00Z", "str"), (True, "bool"),
])
def test_bad_expiry_per_record(tmp_path, exp, what):
    p = tmp_path / "bad.shmkv"
    recs = [("a", 1), ("b", 2, None, exp)]
    with pytest.raises(shmkv.BuildError, match=what) as e:
        shmkv.build(p, recs, format=2)
    assert e.value.index == 1 and "record #2 (index 1)" in str(e.value)
    with pytest.raises(shmkv.BuildError, match=what):
        shmkv.build(p, [{"key": "a", "value": 1, "expires": exp}], format=2)
    with pytest.raises(ValueError, match=what):
        shmkv.build(p, recs[:1], format=2, expires=exp)
    assert not p.exists()


def test_expiry_needs_format_2(tmp_path):
    p = tmp_path / "v1.shmkv"
    t = now() + 60
    with pytest.raises(shmkv.BuildError, match="format") as e:
        shmkv.build(p, [("a", 1), ("b", 2, None, t)], format=1)
    assert e.value.index == 1
    with pytest.raises(shmkv.BuildError, match="format"):
        shmkv.build(p, [{"key": "a", "value": 1, "expires": t}], format=1)
    with pytest.raises(ValueError, match="format=2"):
        shmkv.build(p, [], expires=t, format=1)
    # the default is 2: it holds them
    d = tmp_path / "default.shmkv"
    shmkv.build(d, [{"key": "a", "value": 1, "expires": t}], expires=t + 1)
    with shmkv.open(d) as c:
        assert c.format == 2 and c.expires("a") == t
    for bad in (0, 3, "2", True, 2.0):
        with pytest.raises(ValueError, match="expected 1 or 2"):
            shmkv.build(p, [("a", 1)], format=bad)
    with pytest.raises(TypeError, match="expires"):
        shmkv.build_file(p, "-", expires=t, format=2)
    assert not p.exists()


def test_join_keeps_format_and_expiry(tmp_path):
    t = now() + 86400
    recs = [(f"key_{i}", i, None, t + i if i % 3 else None) for i in range(900)]
    n, buckets = 3, 400
    frags = []
    for k in range(1, n + 1):
        frags.append(tmp_path / f"part{k}.shmkv")
        shmkv.build(frags[-1], recs, part=(k, n), buckets=buckets, filter_part=True,
                    created=CREATED, format=2)
    shmkv.join(tmp_path / "joined.shmkv", frags)
    shmkv.build(tmp_path / "one.shmkv", recs, buckets=buckets, created=CREATED, format=2)
    assert (tmp_path / "joined.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
    c = shmkv.open(tmp_path / "joined.shmkv")
    assert c.format == 2 and c.expires("key_1") == t + 1 and c.expires("key_3") is None
    # fragments of another format are refused
    shmkv.build(frags[1], [r[:2] for r in recs], part=(2, n), buckets=buckets,
                filter_part=True, created=CREATED, format=1)
    with pytest.raises(shmkv.Error, match="format"):
        shmkv.join(tmp_path / "mixed.shmkv", frags)
    assert not (tmp_path / "mixed.shmkv").exists()


def test_build_file_tsv_expires(tmp_path):
    t = now() + 86400
    (tmp_path / "in.tsv").write_text(f"a\t1\t{t}\nb\t2\t\nc\t3\t2100-01-01T00:00:00Z\n")
    p = tmp_path / "t.shmkv"
    shmkv.build_file(p, tmp_path / "in.tsv", format=("tsv", 2), tsv_expires=True,
                     created=CREATED)
    c = shmkv.open(p)
    assert c.format == 2 and c["a"] == "1" and c.expires("a") == t
    assert c.expires("b") is None
    assert c.expires("c") == int(datetime.datetime(2100, 1, 1, tzinfo=UTC).timestamp())
    # without tsv_expires the third column is an error; in format 1, the expiry is
    with pytest.raises(shmkv.BuildError):
        shmkv.build_file(tmp_path / "x.shmkv", tmp_path / "in.tsv", format=2)
    with pytest.raises(shmkv.BuildError):
        shmkv.build_file(tmp_path / "x.shmkv", tmp_path / "in.tsv", tsv_expires=True, format=1)
    assert not (tmp_path / "x.shmkv").exists()
    # format as a version alone: the input from the name
    shmkv.build_file(tmp_path / "v.shmkv", tmp_path / "in.tsv", format=2, tsv_expires=True,
                     created=CREATED)
    assert (tmp_path / "v.shmkv").read_bytes() == p.read_bytes()
    for bad in (("tsv", "jsonl"), (1, 2), 3.0, True):
        with pytest.raises((ValueError, TypeError)):
            shmkv.build_file(tmp_path / "x.shmkv", tmp_path / "in.tsv", format=bad)

