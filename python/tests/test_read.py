"""Reading: the mapping API, every value type, typed getters, get_many,
errors and the zero-copy Array."""
import array
import os
import gc

import numpy as np
import pytest
import shmkv

from conftest import SAMPLE, TREE, sample_records


@pytest.fixture
def image(tmp_path):
    p = tmp_path / "t.shmkv"
    shmkv.build(p, sample_records() + [("vec128", np.arange(128, dtype=np.float32))],
                created=1700000000)
    return p


def test_installed_copy_not_tree():
    if os.environ.get("SHMKV_INSTALLED") == "1":
        assert not os.path.abspath(shmkv.__file__).startswith(os.path.join(TREE, "python"))


def test_mapping_api(image):
    with shmkv.open(image) as c:
        assert len(c) == len(SAMPLE) + 1
        for k, v in SAMPLE:
            got = c[k]
            if isinstance(got, shmkv.Array):
                got = got.tolist()
            assert got == v, k
            assert k in c
            assert c.get(k) is not None
        assert "nope" not in c
        assert c.get("nope") is None
        assert c.get("nope", 7) == 7
        with pytest.raises(KeyError) as e:
            c["nope"]
        assert isinstance(e.value, shmkv.NotFound) and isinstance(e.value, shmkv.Error)
        assert e.value.args == ("nope",)
        assert e.value.errname == "SHMKV_ENOTFOUND" and e.value.code == -31200
        keys = list(c)
        assert sorted(keys) == sorted([k for k, _ in SAMPLE] + ["vec128"])
        assert sorted(c.keys()) == sorted(keys)
        items = dict(c.items())
        assert items["s"] == "héllo" and items["i"] == -42
        assert len(list(c.values())) == len(keys)
    assert c.closed
    with pytest.raises(ValueError):
        c["s"]


def test_mapping_abc(image):
    """A Cache is a collections.abc.Mapping: keys/values/items are views
    (len, in, set operations on keys and items), == compares contents with
    any Mapping (Arrays by value), and it is unhashable, as a dict."""
    import collections.abc as abc
    with shmkv.open(image) as c, shmkv.open(image) as d:
        assert isinstance(c, abc.Mapping) and issubclass(shmkv.Cache, abc.Mapping)
        assert not isinstance(c, abc.MutableMapping)
        ks, vs, its = c.keys(), c.values(), c.items()
        assert isinstance(ks, abc.KeysView) and isinstance(vs, abc.ValuesView)
        assert isinstance(its, abc.ItemsView)
        assert len(ks) == len(vs) == len(its) == len(c) == len(SAMPLE) + 1
        assert "s" in ks and "nope" not in ks and ("i", -42) in its and ("i", 1) not in its
        assert -42 in vs and "héllo" in vs
        assert ks & {"s", "nope"} == {"s"} and ks - set(ks) == set()
        assert list(ks) == list(c) and [k for k, _ in its] == list(ks)
        assert [v for _, v in its] == list(vs)
        # a view reads the cache when used: iterated twice, the same
        assert list(its) == list(its)
        plain = {k: (v.tolist() if isinstance(v, shmkv.Array) else v) for k, v in its}
        assert c == plain and plain == c and c == d and not c != d
        assert c != dict(plain, s="other") and c != {} and c != [("s", "héllo")]
        assert c.get("s") == "héllo" and dict(c) == dict(its)
        with pytest.raises(TypeError):
            hash(c)
        with pytest.raises(TypeError):
            c["s"] = "x"  # read-only


def test_key_kinds(image):
    c = shmkv.open(image)
    for k in (b"s", bytearray(b"s"), memoryview(b"xsx")[1:2], array.array("B", b"s")):
        assert c[k] == "héllo"
    with pytest.raises(TypeError):
        c[5]
    with pytest.raises(shmkv.KeyTooLong):
        c["k" * 70000]


def test_types_exact(image):
    c = shmkv.open(image)
    assert type(c["i"]) is int and type(c["f"]) is float and c["t"] is True
    assert type(c["b"]) is bytes and type(c["S"]) is list
    assert c["F"].typecode == "f" and c["D"].typecode == "d" and c["I"].typecode == "q"
    assert c.type_of("F") == "f32list" and c.type_of("s") == "string"


@pytest.mark.parametrize("getter,key", [
    ("get_str", "s"), ("get_bytes", "b"), ("get_i64", "i"), ("get_f64", "f"),
    ("get_bool", "t"), ("get_f32list", "F"), ("get_f64list", "D"), ("get_i64list", "I"),
    ("get_strlist", "S")])
def test_typed_getters(image, getter, key):
    c = shmkv.open(image)
    getattr(c, getter)(key)  # its own type: fine
    for other in ("s", "i", "f", "F", "D", "S", "t", "b", "I"):
        if other == key:
            continue
        with pytest.raises(TypeError) as e:  # nothing is converted
            getattr(c, getter)(other)
        assert isinstance(e.value, shmkv.TypeMismatch)
    with pytest.raises(KeyError):
        getattr(c, getter)("nope")


def test_zero_copy_128_f32(image):
    """A 128-float f32 list comes back without a copy: its buffer lies
    inside the image's mapping."""
    c = shmkv.open(image)
    v = c.get_f32list("vec128")
    base, size = c.mapping
    a = np.asarray(v)
    addr = a.__array_interface__["data"][0]
    assert base <= addr and addr + 128 * 4 <= base + size
    assert addr == v.address
    assert a.dtype == np.float32 and len(a) == 128 and a[127] == 127.0
    assert not a.flags.writeable
    m = memoryview(v)
    assert m.readonly and m.format == "f" and m.nbytes == 512
    with pytest.raises(ValueError):
        np.frombuffer(v, dtype=np.float32).setflags(write=True)
    with pytest.raises(TypeError):
        memoryview(v).cast("B")[0] = 1
    assert bytes(m)[:8] == np.array([0, 1], np.float32).tobytes()


def test_get_many(image):
    c = shmkv.open(image)
    keys = ["s", "nope", b"i", "F"] * 40
    got = c.get_many(keys, default="D")
    assert len(got) == len(keys)
    for k, g in zip(keys, got):
        want = c.get(k, "D")
        assert (g.tolist() if isinstance(g, shmkv.Array) else g) == \
               (want.tolist() if isinstance(want, shmkv.Array) else want)


def test_get_many_out(tmp_path):
    p = tmp_path / "v.shmkv"
    rows = {f"k{i}": np.full(4, i, np.float32) for i in range(100)}
    shmkv.build(p, rows.items())
    c = shmkv.open(p)
    keys = [f"k{i}" for i in range(0, 120, 3)]
    out = np.empty((len(keys), 4), np.float32)
    missing = c.get_many(keys, out=out)
    assert missing == [i for i, k in enumerate(keys) if k not in rows]
    for i, k in enumerate(keys):
        if k in rows:
            assert (out[i] == rows[k]).all()
        else:
            assert np.isnan(out[i]).all()
    arr, miss = shmkv.get_array(c, keys)
    assert miss == missing and arr.dtype == np.float32 and (arr[0] == 0).all()
    with pytest.raises(ValueError):  # rows of another length
        c.get_many(keys, out=np.empty((len(keys), 5), np.float32))
    with pytest.raises(TypeError):  # another type
        c.get_many(keys, out=np.empty((len(keys), 4), np.float64))
    with pytest.raises(ValueError):  # not one row per key
        c.get_many(keys, out=np.empty((3, 4), np.float32))


CHILD_GET_MANY_KEYS_FREED = """
import sys
import numpy as np
import shmkv
c = shmkv.open(sys.argv[1])
keys = ["".join(("k", str(i))) for i in range(100)]  # held by the list alone
class Fill:
    def __float__(self):  # runs inside get_many, after the keys were read
        keys.clear()      # frees them, and the list's item array
        return -1.0
out = np.empty((100, 4), np.float32)
missing = c.get_many(keys, out=out, fill=Fill())
print(missing == [] and out[:, 0].tolist() == list(range(100)))
"""


def test_get_many_keys_freed_meanwhile(tmp_path):
    """get_many holds its keys while it works: Python code it runs (fill's
    __float__; another thread while the GIL is released) may empty the list.
    Under PYTHONMALLOC=debug freed memory is overwritten: a key read after
    its str was freed would miss."""
    import subprocess
    import sys
    p = tmp_path / "v.shmkv"
    shmkv.build(p, ((f"k{i}", np.full(4, i, np.float32)) for i in range(100)))
    r = subprocess.run([sys.executable, "-c", CHILD_GET_MANY_KEYS_FREED, str(p)],
                       env=dict(os.environ, PYTHONMALLOC="debug"), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "True", (r.returncode, r.stdout, r.stderr)


def test_lifetime_across_close(image):
    """An Array keeps its generation mapped after close(); the mapping goes
    with the last Array."""
    def mapped():
        with open("/proc/self/maps") as f:
            return str(image) in f.read()
    c = shmkv.open(image)
    v = c["vec128"]
    a = np.asarray(v)
    it = iter(c.items())  # an iterator holds its generation (a view reads the cache)
    c.close()
    assert mapped()
    assert v[5] == 5.0 and a[6] == 6.0 and len(list(it)) == len(SAMPLE) + 1
    del v, it
    gc.collect()
    assert mapped()  # a still holds a view
    del a
    gc.collect()
    assert not mapped()


def test_errors(tmp_path):
    with pytest.raises(shmkv.OSFailure) as e:
        shmkv.open(tmp_path / "missing")
    assert e.value.errno == 2 and e.value.errname == "ENOENT" and isinstance(e.value, OSError)
    junk = tmp_path / "junk"
    junk.write_bytes(b"not an image" * 1000)
    with pytest.raises(shmkv.CorruptImage) as e:
        shmkv.open(junk)
    assert e.value.errname == "SHMKV_EMAGIC" and "junk" in str(e.value)
    with pytest.raises(shmkv.CacheNotFound):
        shmkv.attach("nosuchcache", root=str(tmp_path))


def test_threads_and_close(tmp_path):
    """Threads reading one Cache (single gets, batches with the GIL released,
    iteration, zero-copy values) while another closes it: each read either
    answers right or raises ValueError (closed); values taken before stay
    valid."""
    import threading
    p = tmp_path / "th.shmkv"
    n = 5000
    shmkv.build(p, ((f"k{i}", np.full(16, i, np.float32)) for i in range(n)))
    for _ in range(3):
        c = shmkv.open(p)
        errors, held = [], []
        start = threading.Barrier(5)

        def reader(seed):
            start.wait()
            rnd = __import__("random").Random(seed)
            try:
                while True:
                    i = rnd.randrange(n)
                    v = c[f"k{i}"]
                    assert v[0] == i
                    vals = c.get_many([f"k{(i + j) % n}" for j in range(64)])
                    assert vals[5][0] == (i + 5) % n
                    held.append(vals[0])
            except ValueError:
                pass  # closed
            except Exception as e:  # anything else is a failure
                errors.append(e)

        ts = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
        for t in ts:
            t.start()
        start.wait()
        # close while the readers run, once they have taken 400 values (an event,
        # not a fixed sleep: a loaded machine may not schedule them soon)
        end = __import__("time").monotonic() + 60
        while len(held) < 400 and not errors and __import__("time").monotonic() < end:
            __import__("time").sleep(0.01)
        c.close()
        for t in ts:
            t.join(60)
        assert not errors, errors
        assert held and all(len(v) == 16 for v in held[-100:])


class Key(str):
    """A str subclass: its text lies apart from the object (not compact)."""


def fast_path_records():
    """Keys and string values around the hot paths' cases (cache.c: a compact
    ASCII str key read in place, an ASCII value copied, anything else by
    the UTF-8 codec): every value length 0..40 in ASCII and with one non-ASCII
    character at each position up to 20, text beside the ASCII range,
    embedded NULs, long keys."""
    recs = [(f"a{n}", "v" * n) for n in range(41)]
    for n in range(1, 21):
        for i in range(n):
            recs.append((f"u{n}.{i}", "v" * i + "é" + "v" * (n - i - 1)))
    recs += [
        ("wide", "😀 ключ"), ("ключ", "значение"), ("café", "crème"), ("é" * 200, "long utf-8"),
        ("nul\x00key", "nul\x00value"), ("\x00", "\x00"), ("k" * 255, "255"),
        ("k" * 256, "256"), ("k" * 1000, "x" * 300), ("high\x7f", "del\x7f"),
    ]
    return recs


def test_str_fast_paths(tmp_path):
    recs = fast_path_records()
    p = tmp_path / "f.shmkv"
    shmkv.build(p, recs, created=1700000000)
    with shmkv.open(p) as c:
        for k, v in recs:
            for key in (k, Key(k), k.encode()):
                got = c[key]
                assert type(got) is str and got == v, (key, v)
                assert c.get(key) == v and c.get_str(key) == v and key in c
        assert c.get_many([k for k, _ in recs]) == [v for _, v in recs]
        assert dict(c.items()) == dict(recs)
        # the same text as absent keys: one character off, each kind of key
        for k in ("a41", "ключи", "cafe", Key("a"), "nul\x00kez", "k" * 254, "é" * 199):
            assert k not in c and c.get(k, 5) == 5
            with pytest.raises(shmkv.NotFound):
                c[k]
        with pytest.raises(shmkv.TypeMismatch):
            c.get_i64("a3")


def forge_string_values(tmp_path, n, values=1):
    """An image of `values` string values, k0's "Z" * n and the others' "B"
    * n, "C" * n...; and a function that writes a copy with bytes at k0's
    value's position i (found by writing other text there and reading it
    back)."""
    p = tmp_path / f"n{n}.shmkv"
    shmkv.build(p, [(f"k{j}", (chr(65 + j) if j else "Z") * n) for j in range(values)],
                created=1700000000)
    data = p.read_bytes()
    q = tmp_path / "forged.shmkv"

    def forge(at, text):
        q.write_bytes(data[:at] + text + data[at + len(text):])

    def value_at(at):  # whether k0's value bytes are those at `at`
        forge(at, b"Y" * n)
        try:
            with shmkv.open(q, verify=False) as c:
                return c.get("k0") == "Y" * n
        except shmkv.Error:  # a header's byte
            return False

    found = [at for at in range(len(data)) if data.startswith(b"Z" * n, at) and value_at(at)]
    assert len(found) == 1, found

    def write(i, text):
        forge(found[0] + i, text)
        return q
    return write


def test_str_value_not_utf8(tmp_path):
    """A string value that is not UTF-8 (a damaged image opened without
    verify) is CorruptImage for every read: a byte 0x80 or 0xff at each
    position of values of 1..24 bytes, whichever check reads it; and an
    overlong form, a surrogate and a code point above U+10FFFF."""
    for n in range(1, 25):
        write = forge_string_values(tmp_path, n)
        bads = [(i, b) for i in range(n) for b in (b"\x80", b"\xff")]
        if n >= 4:
            bads += [(0, b"\xc0\xaf"), (0, b"\xed\xa0\x80"), (0, b"\xf4\x90\x80\x80")]
        for i, bad in bads:
            with shmkv.open(write(i, bad), verify=False) as c:
                for read in (lambda: c["k0"], lambda: c.get("k0"), lambda: c.get_str("k0"),
                             lambda: c.get_many(["k0"]), lambda: list(c.items()),
                             lambda: list(c.values())):
                    with pytest.raises(shmkv.CorruptImage) as e:
                        read()
                    assert e.value.errname == "SHMKV_ECORRUPT"
                    assert "\ufffd" not in str(e.value)


def test_get_many_answers_every_key(tmp_path):
    """get_many answers each key as its single get would (lib/FORMAT.md):
    one damaged value raises the first failing key's exception (request
    order), naming the key and its index, carrying .results (default in a
    failed key's place) and .errors (index -> exception of every failed
    key); absent keys are no errors; the other keys' values are right."""
    write = forge_string_values(tmp_path, 12, values=3)
    q = write(3, b"\xff")
    long_key = "k" * 70000
    with shmkv.open(q, verify=False) as c:
        assert c.get_many(["k1", "nope", "k2"], default=0) == ["B" * 12, 0, "C" * 12]
        keys = ["k1", "nope", long_key, "k0", "k2"]
        with pytest.raises(shmkv.KeyTooLong) as e:
            c.get_many(keys, default="D")
        first = e.value
        assert "keys[2]" in str(first) and "kkkk" in str(first)
        assert first.results == ["B" * 12, "D", "D", "D", "C" * 12]
        assert sorted(first.errors) == [2, 3] and first.errors[2] is first
        assert isinstance(first.errors[3], shmkv.CorruptImage)
        assert "keys[3]" in str(first.errors[3]) and "'k0'" in str(first.errors[3])
        # each key's single get raises the same class
        with pytest.raises(shmkv.KeyTooLong):
            c[long_key]
        with pytest.raises(shmkv.CorruptImage) as single:
            c["k0"]
        assert "'k0'" in str(single.value)
        with pytest.raises(shmkv.CorruptImage) as e:
            c.get_many(["k0"])
        assert e.value.results == [None] and list(e.value.errors) == [0]


def test_get_many_out_answers_every_key(tmp_path):
    """get_many(out=): a row of another type or length is that key's error
    (TypeMismatch, ValueError), raised for the first one, with every row
    filled and the missing rows in .results."""
    p = tmp_path / "o.shmkv"
    shmkv.build(p, [("a", [1.0, 2.0], "f32list"), ("b", [1.0], "f32list"), ("c", "text"),
                    ("d", [3.0, 4.0], "f32list")])
    with shmkv.open(p) as c:
        out = np.zeros((5, 2), np.float32)
        with pytest.raises(ValueError) as e:
            c.get_many(["a", "b", "nope", "c", "d"], out=out)
        assert "keys[1]" in str(e.value) and "'b'" in str(e.value)
        assert e.value.results == [2] and sorted(e.value.errors) == [1, 3]
        assert isinstance(e.value.errors[3], shmkv.TypeMismatch)
        assert out[0].tolist() == [1.0, 2.0] and out[4].tolist() == [3.0, 4.0]
        assert np.isnan(out[1]).all() and np.isnan(out[2]).all() and np.isnan(out[3]).all()
