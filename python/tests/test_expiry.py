"""Expiry (lib/FORMAT.md §17.6) and every type through each read path:
per-record expiry (int, aware datetime, expires=), expired entries absent
(get, get_many, iteration, len), Cache.expires, join and build_file with
expiry, the same bytes as shmctl. Expiry times are relative to
time.time(): the package does not pin lib's clock."""
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


def test_every_type(tmp_path):
    p = tmp_path / "t.shmkv"
    vec = np.arange(128, dtype=np.float32)
    shmkv.build(p, sample_records() + [("vec128", vec)], created=CREATED)
    with shmkv.open(p, deep=True) as c:
        assert c.format == 2
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


def shmctl_build(shmctl, jsonl, out, recs):
    """recs written to jsonl as JSON lines, built by shmctl into out."""
    with open(jsonl, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    subprocess.run([shmctl, "image", "build", "-o", str(out), "--created", str(CREATED),
                    str(jsonl)], check=True, stdout=subprocess.DEVNULL)


def test_same_bytes_as_shmctl_with_expiry(tmp_path, shmctl):
    t = now() + 86400
    recs = [{"key": f"k{i}", "value": f"v{i}", "expires": t + i} for i in range(200)]
    recs += [{"key": "never", "value": [1, 2]}]
    shmctl_build(shmctl, tmp_path / "in.jsonl", tmp_path / "c.shmkv", recs)
    shmkv.build(tmp_path / "p.shmkv", recs, created=CREATED)
    assert (tmp_path / "p.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    # tuples with datetimes, and build_file, give the same bytes
    tup = [(r["key"], r["value"], None,
            datetime.datetime.fromtimestamp(r["expires"], UTC) if "expires" in r else None)
           for r in recs]
    shmkv.build(tmp_path / "d.shmkv", tup, created=CREATED)
    assert (tmp_path / "d.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    shmkv.build_file(tmp_path / "f.shmkv", tmp_path / "in.jsonl", created=CREATED)
    assert (tmp_path / "f.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()


def test_expired_entries_are_absent(tmp_path):
    p = tmp_path / "e.shmkv"
    past, future = now() - 3600, now() + 3600
    shmkv.build(p, [("dead", "x", None, past), ("live", [1.5, 2.5], "f32list", future),
                    {"key": "never", "value": 7}, {"key": "gone", "value": [1, 2],
                                                   "expires": past}],
                created=CREATED)
    c = shmkv.open(p)
    assert len(c) == 2  # what iteration yields: the live entries
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
    # records(): every record, expired ones included, with its expiry
    recs = {k: (plain(v), t) for k, v, t in c.records()}
    assert recs == {"dead": ("x", past), "live": ([1.5, 2.5], future), "never": (7, None),
                    "gone": ([1, 2], past)}
    assert sorted(plain(v) for v in c.values() if not isinstance(v, shmkv.Array)) == [7]
    out = np.zeros((3, 2), np.float32)
    assert c.get_many(["gone", "live", "dead"], out=out) == [0, 2]


def test_entry_expires_while_open(tmp_path):
    """An entry live at open is absent once the clock reaches its expiry
    (now >= expires), for every read path."""
    p = tmp_path / "soon.shmkv"
    t = now() + 3
    shmkv.build(p, [("soon", "x"), ("stay", "y", None, t + 3600)], created=CREATED, expires=t)
    c = shmkv.open(p)
    if time.time() < t - 0.5:  # the build ran in time (a loaded machine may be slower)
        assert c["soon"] == "x" and "soon" in c and sorted(c) == ["soon", "stay"]
        assert len(c) == 2
    deadline = time.monotonic() + 60
    while time.time() < t and time.monotonic() < deadline:
        time.sleep(0.1)
    assert time.time() >= t
    assert "soon" not in c and c.get_many(["soon"]) == [None] and sorted(c) == ["stay"]
    assert len(c) == 1 and list(c.keys()) == ["stay"]
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
                created=CREATED, expires=base + 7)
    c = shmkv.open(p)
    assert c.expires("int") == base
    assert c.expires("frac") == base + 1  # a fraction of a second rounds up
    assert c.expires("zone") == base
    assert c.expires("own_none") is None  # a record's own None wins over expires=
    assert c.expires("default") == base + 7
    assert c.expires("max") == 2**32 - 1 and c["max"] == 6


@pytest.mark.parametrize("exp, what, err", [
    (datetime.datetime(2030, 1, 1), "naive datetime", ValueError),
    (0, "outside", ValueError), (-5, "outside", ValueError), (2**32, "outside", ValueError),
    (2**70, "outside", ValueError),
    (datetime.datetime(1960, 1, 1, tzinfo=UTC), "outside", ValueError),
    (1.5e9, "float", TypeError), ("2030-01-01T00:00:00Z", "str", TypeError),
    (True, "bool", TypeError),
])
def test_bad_expiry(tmp_path, exp, what, err):
    """A bad expiry of a record is a BuildError naming it; expires= of
    another type is a TypeError, out of range a ValueError; nothing is
    written."""
    p = tmp_path / "bad.shmkv"
    recs = [("a", 1), ("b", 2, None, exp)]
    with pytest.raises(shmkv.BuildError, match=what) as e:
        shmkv.build(p, recs)
    assert e.value.index == 1 and "record #2 (index 1)" in str(e.value)
    with pytest.raises(shmkv.BuildError, match=what):
        shmkv.build(p, [{"key": "a", "value": 1, "expires": exp}])
    with pytest.raises(err, match="expires" if err is TypeError else what):
        shmkv.build(p, recs[:1], expires=exp)
    assert not p.exists()


def test_expires_is_build_only(tmp_path):
    p = tmp_path / "x.shmkv"
    with pytest.raises(TypeError, match="expires"):
        shmkv.build_file(p, "-", expires=now() + 60)
    assert not p.exists()


def test_join_keeps_expiry(tmp_path):
    t = now() + 86400
    recs = [(f"key_{i}", i, None, t + i if i % 3 else None) for i in range(900)]
    n, buckets = 3, 400
    frags = []
    for k in range(1, n + 1):
        frags.append(tmp_path / f"part{k}.shmkv")
        shmkv.build(frags[-1], recs, part=(k, n), buckets=buckets, filter_part=True,
                    created=CREATED)
    shmkv.join(tmp_path / "joined.shmkv", frags)
    shmkv.build(tmp_path / "one.shmkv", recs, buckets=buckets, created=CREATED)
    assert (tmp_path / "joined.shmkv").read_bytes() == (tmp_path / "one.shmkv").read_bytes()
    c = shmkv.open(tmp_path / "joined.shmkv")
    assert c.expires("key_1") == t + 1 and c.expires("key_3") is None


def test_build_file_tsv_expires(tmp_path):
    t = now() + 86400
    (tmp_path / "in.tsv").write_text(f"a\t1\t{t}\nb\t2\t\nc\t3\t2100-01-01T00:00:00Z\n")
    p = tmp_path / "t.shmkv"
    shmkv.build_file(p, tmp_path / "in.tsv", format="tsv", tsv_expires=True, created=CREATED)
    c = shmkv.open(p)
    assert c["a"] == "1" and c.expires("a") == t
    assert c.expires("b") is None
    assert c.expires("c") == int(datetime.datetime(2100, 1, 1, tzinfo=UTC).timestamp())
    # without tsv_expires the third column is an error
    with pytest.raises(shmkv.BuildError):
        shmkv.build_file(tmp_path / "x.shmkv", tmp_path / "in.tsv")
    assert not (tmp_path / "x.shmkv").exists()
    # the input format from the name
    shmkv.build_file(tmp_path / "v.shmkv", tmp_path / "in.tsv", tsv_expires=True,
                     created=CREATED)
    assert (tmp_path / "v.shmkv").read_bytes() == p.read_bytes()
    for bad in (("tsv", 2), 2, 1, "csv", True):
        with pytest.raises((ValueError, TypeError)):
            shmkv.build_file(tmp_path / "x.shmkv", tmp_path / "in.tsv", format=bad)
