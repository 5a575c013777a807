"""shmkv.upgrade (the builder's shmkv_build_upgrade): a format 1 image
becomes the format 2 image a fresh build of its records gives, byte for
byte, the bytes `shmctl image upgrade` writes; this reader refuses the
format 1 image itself, naming that command. Inputs: tests/upgrade/ (a
geonames-like image of every type and its records' generator) and the
format 1 vectors (tests/vectors/v1/, their records in the manifest)."""
import errno
import json
import os
import subprocess
import sys

import pytest
import shmkv

from conftest import TREE

UPG = os.path.join(TREE, "tests", "upgrade")
VEC = os.path.join(TREE, "tests", "vectors")
RETIRED = "image format version 1 is retired: convert it with 'shmctl image upgrade OLD -o NEW'"


def v1_vectors():
    with open(os.path.join(VEC, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    return [pytest.param(v, id=v["name"]) for v in m["vectors"] if v["format"] == 1]


def test_geo_upgrade_is_a_fresh_build(tmp_path, shmctl):
    old = os.path.join(UPG, "geo_v1.shmkv")
    with pytest.raises(shmkv.VersionMismatch) as e:
        shmkv.open(old)
    assert RETIRED in str(e.value) and e.value.errname == "SHMKV_EVERSION"
    jsonl = tmp_path / "geo.jsonl"
    with open(jsonl, "w", encoding="utf-8") as f:
        subprocess.run([sys.executable, os.path.join(UPG, "geo_records.py")], stdout=f,
                       check=True, timeout=300)
    st = shmkv.upgrade(old, tmp_path / "up.shmkv", threads=2)
    shmkv.build_file(tmp_path / "fresh.shmkv", jsonl)
    new = (tmp_path / "up.shmkv").read_bytes()
    assert new == (tmp_path / "fresh.shmkv").read_bytes()
    assert st["entries"] == sum(1 for _ in open(jsonl, encoding="utf-8")) - 1  # the meta line
    subprocess.run([shmctl, "image", "upgrade", old, "-o", str(tmp_path / "c.shmkv")],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    assert new == (tmp_path / "c.shmkv").read_bytes()
    with shmkv.open(tmp_path / "up.shmkv", deep=True) as c:
        assert c.format == 2 and len(c) == st["entries"] and c.image_name == "geo"


def _plain(v):
    return v.tolist() if isinstance(v, shmkv.Array) else v.hex() if isinstance(v, bytes) else v


def _want(r):
    v = r["value"]
    if r["type"] in ("i64", "i64list"):
        return [int(x) for x in v] if isinstance(v, list) else int(v)
    return v


@pytest.mark.parametrize("v", v1_vectors())
def test_vector_upgrade(tmp_path, shmctl, v):
    """Each format 1 vector: refused at open; upgraded, it holds its
    records (each value as the manifest says), and its bytes are
    shmctl image upgrade's."""
    old = os.path.join(VEC, v["file"])
    with pytest.raises(shmkv.VersionMismatch, match="shmctl image upgrade"):
        shmkv.open(old)
    shmkv.upgrade(old, tmp_path / "up.shmkv")
    subprocess.run([shmctl, "image", "upgrade", old, "-o", str(tmp_path / "c.shmkv")],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    assert (tmp_path / "up.shmkv").read_bytes() == (tmp_path / "c.shmkv").read_bytes()
    with shmkv.open(tmp_path / "up.shmkv", deep=True) as c:
        recs = v.get("records", [])
        assert len(c) == len(recs)
        for r in recs:
            k = bytes.fromhex(r["key_hex"])
            got = c[k]
            assert c.type_of(k) == r["type"], r["key_hex"]
            if r["type"] == "f32list":  # the manifest's 9 digits name one f32
                assert got.tolist() == pytest.approx(r["value"], rel=1e-7), r["key_hex"]
            elif r["type"] == "f64" and got != got:
                assert r["value"] != r["value"]
            else:
                assert _plain(got) == _want(r), r["key_hex"]


def test_upgrade_errors(tmp_path):
    """A bad input is an error naming it, never a partial output: a format 2
    image, a damaged format 1 image, a missing file; an existing output is
    kept."""
    out = tmp_path / "out.shmkv"
    out.write_bytes(b"old")
    v2 = tmp_path / "v2.shmkv"
    shmkv.build(v2, [("a", 1)])
    with pytest.raises(shmkv.VersionMismatch, match="already format 2") as e:
        shmkv.upgrade(v2, out)
    assert str(e.value).count(str(v2)) == 1, str(e.value)
    data = bytearray(open(os.path.join(UPG, "geo_v1.shmkv"), "rb").read())
    data[len(data) // 2] ^= 0x10
    bad = tmp_path / "bad.shmkv"
    bad.write_bytes(bytes(data))
    with pytest.raises(shmkv.CorruptImage) as e:
        shmkv.upgrade(bad, out)
    assert str(e.value).count(str(bad)) == 1, str(e.value)
    with pytest.raises(shmkv.OSFailure) as e:
        shmkv.upgrade(tmp_path / "gone.shmkv", out)
    assert e.value.errno == errno.ENOENT and "gone.shmkv" in str(e.value)
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["bad.shmkv", "out.shmkv", "v2.shmkv"]
