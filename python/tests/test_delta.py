"""Delta images from Python (lib/FORMAT.md §19): build(..., delta_of=BASE,
after=PREV) with removals (shmkv.REMOVE, {"key": k, "remove": True}),
build_file with JSONL removals and tsv_removes, diff() and apply() over the
builder's C API: the bytes `shmctl image build/diff/apply` write, and
apply's output byte-identical to a build of the merged records.
tests/builder/delta_random_test checks the same rules on random chains."""
import os
import subprocess

import pytest
import shmkv

CREATED = 1700000000
BASE = [("a", "one"), ("b", 2), ("c", [1.5, 2.5]), ("d", b"\x00bytes"), ("e", True),
        ("x", "expired", None, 1000)]


def _build(path, records, **kw):
    return shmkv.build(path, records, created=CREATED, **kw)


@pytest.fixture
def base(tmp_path):
    p = tmp_path / "base.shmkv"
    _build(p, BASE)
    return p


def merged(*changes):
    """BASE with each change applied: (key, value...) sets, (key, REMOVE) removes."""
    out = {r[0]: r for r in BASE}
    for ch in changes:
        for r in ch:
            if r[1] is shmkv.REMOVE:
                out.pop(r[0], None)
            else:
                out[r[0]] = r
    return list(out.values())


D1 = [("a", "uno"), ("b", shmkv.REMOVE), ("zz", shmkv.REMOVE), ("n", 7), ("x", shmkv.REMOVE)]
D2 = [("a", shmkv.REMOVE), ("b", "back"), ("m", [1, 2, 3])]


def test_remove_marker_is_typed_and_named():
    assert repr(shmkv.REMOVE) == "shmkv.REMOVE"
    assert isinstance(shmkv.REMOVE, shmkv.Remove)
    assert "REMOVE" in shmkv.__all__ and "diff" in shmkv.__all__ and "apply" in shmkv.__all__


def test_delta_build_and_apply_is_a_fresh_build(tmp_path, base):
    st = _build(tmp_path / "d1.shmkv", D1, delta_of=base)
    assert st["tombstones"] == 3 and st["entries"] == 5
    full = tmp_path / "full.shmkv"
    _build(full, merged(D1))
    st = shmkv.apply(base, [tmp_path / "d1.shmkv"], tmp_path / "new.shmkv")
    assert (tmp_path / "new.shmkv").read_bytes() == full.read_bytes()
    assert st["entries"] == len(merged(D1))
    with shmkv.open(tmp_path / "new.shmkv") as c:
        assert c["a"] == "uno" and "b" not in c and c["n"] == 7 and "x" not in c


def test_removal_shapes_give_the_same_delta(tmp_path, base):
    """(key, REMOVE), {"key": k, "remove": True}, JSONL "remove": true and a
    TSV key alone with tsv_removes are one tombstone."""
    _build(tmp_path / "t.shmkv", [("a", "uno"), ("b", shmkv.REMOVE)], delta_of=base)
    _build(tmp_path / "d.shmkv", [{"key": "a", "value": "uno"}, {"key": "b", "remove": True}],
           delta_of=base)
    (tmp_path / "d.jsonl").write_text('{"key": "a", "value": "uno"}\n'
                                      '{"key": "b", "remove": true}\n')
    shmkv.build_file(tmp_path / "j.shmkv", tmp_path / "d.jsonl", delta_of=base, created=CREATED)
    (tmp_path / "d.tsv").write_text("a\tuno\nb\n")
    shmkv.build_file(tmp_path / "v.shmkv", tmp_path / "d.tsv", delta_of=base, tsv_removes=True,
                     created=CREATED)
    want = (tmp_path / "t.shmkv").read_bytes()
    for name in ("d", "j", "v"):
        assert (tmp_path / f"{name}.shmkv").read_bytes() == want, name


def test_chain_after_and_one_delta(tmp_path, base, shmctl):
    d1, d2 = tmp_path / "d1.shmkv", tmp_path / "d2.shmkv"
    _build(d1, D1, delta_of=base, dedup=False)
    _build(d2, D2, delta_of=base, after=d1)
    full = tmp_path / "full.shmkv"
    _build(full, merged(D1, D2))
    shmkv.apply(base, [d1, d2], tmp_path / "new.shmkv", threads=1)
    assert (tmp_path / "new.shmkv").read_bytes() == full.read_bytes()
    shmkv.apply(base, [d1, d2], tmp_path / "one.shmkv", as_delta=True)
    shmkv.apply(base, [tmp_path / "one.shmkv"], tmp_path / "again.shmkv")
    assert (tmp_path / "again.shmkv").read_bytes() == full.read_bytes()
    # the bytes shmctl writes
    for args, ours in ((["-o", tmp_path / "c.shmkv"], "new.shmkv"),
                       (["--as-delta", "-o", tmp_path / "c.shmkv"], "one.shmkv")):
        subprocess.run([shmctl, "image", "apply", *map(str, args), str(base), str(d1), str(d2)],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        assert (tmp_path / "c.shmkv").read_bytes() == (tmp_path / ours).read_bytes(), ours


def test_diff_then_apply_gives_new(tmp_path, base, shmctl):
    new = tmp_path / "new.shmkv"
    _build(new, merged(D1, D2), name="new")
    st = shmkv.diff(base, new, tmp_path / "d.shmkv")
    assert st["tombstones"] == 2  # b is back with another value; a and x are gone
    shmkv.apply(base, [tmp_path / "d.shmkv"], tmp_path / "applied.shmkv")
    _build(tmp_path / "want.shmkv", merged(D1, D2))  # apply keeps the base's name
    assert (tmp_path / "applied.shmkv").read_bytes() == (tmp_path / "want.shmkv").read_bytes()
    subprocess.run([shmctl, "image", "diff", "-o", str(tmp_path / "c.shmkv"), str(base),
                    str(new)], check=True, stdout=subprocess.DEVNULL, timeout=120)
    assert (tmp_path / "c.shmkv").read_bytes() == (tmp_path / "d.shmkv").read_bytes()


def test_bad_records_name_the_record(tmp_path, base):
    out = tmp_path / "out.shmkv"
    cases = [
        ([("a", 1), ("b", shmkv.REMOVE)], {}, "only a delta image holds removals", 1),
        ([{"key": "a", "remove": True, "value": 1}], {"delta_of": base}, "has no 'value'", 0),
        ([{"key": "a", "remove": 1}], {"delta_of": base}, "'remove' is True or False", 0),
        ([("a", shmkv.REMOVE, "i64")], {"delta_of": base}, "has no type or expiry", 0),
    ]
    for records, kw, why, index in cases:
        with pytest.raises(shmkv.BuildError) as e:
            _build(out, records, **kw)
        assert why in str(e.value) and e.value.index == index, str(e.value)
        assert not out.exists()
    with pytest.raises(shmkv.DuplicateKey):
        _build(out, [("a", 1), ("a", shmkv.REMOVE)], delta_of=base)
    assert not out.exists()


def test_bad_options_and_chains_raise(tmp_path, base):
    out = tmp_path / "out.shmkv"
    d1, d2 = tmp_path / "d1.shmkv", tmp_path / "d2.shmkv"
    _build(d1, D1, delta_of=base)
    _build(d2, D2, delta_of=base, after=d1)
    with pytest.raises(ValueError, match="give delta_of=BASE too"):
        _build(out, [], after=d1)
    with pytest.raises(ValueError, match="tsv_removes is for delta builds"):
        shmkv.build_file(out, tmp_path / "x.tsv", tsv_removes=True)
    with pytest.raises(TypeError, match="delta_of"):
        _build(out, [], delta_of=3)
    with pytest.raises(shmkv.Error) as e:
        _build(out, [], delta_of=d1)
    assert e.value.errname == "SHMKV_EBASE" and "is a delta image" in str(e.value)
    with pytest.raises(shmkv.Error) as e:
        shmkv.apply(base, [d2, d1], out)
    assert e.value.errname == "SHMKV_EBASE" and "give the chain" in str(e.value)
    with pytest.raises(shmkv.Error) as e:
        shmkv.apply(base, [base], out)
    assert "is a plain image, not a delta" in str(e.value)
    with pytest.raises(ValueError, match="no delta given"):
        shmkv.apply(base, [], out)
    with pytest.raises(TypeError, match="a sequence of paths"):
        shmkv.apply(base, d1, out)  # type: ignore[arg-type]
    with pytest.raises(shmkv.Error) as e:
        shmkv.diff(d1, base, out)
    assert "diff compares two plain images" in str(e.value)
    bad = bytearray(d1.read_bytes())
    bad[len(bad) // 2] ^= 0x40
    (tmp_path / "bad.shmkv").write_bytes(bytes(bad))
    with pytest.raises(shmkv.CorruptImage) as e:
        shmkv.apply(base, [tmp_path / "bad.shmkv"], out)
    assert "bad.shmkv" in str(e.value)
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.shmkv", "base.shmkv", "d1.shmkv", "d2.shmkv"]
