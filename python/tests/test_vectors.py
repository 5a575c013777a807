"""The shared conformance vectors (tests/vectors/README.md, manifest
version 3) through the Python API: each image's verdict at open (checksums
on) and at a deep open (open, then the full structural check); a format 1
image refused as VersionMismatch naming `shmctl image upgrade`; for the
images verify accepts, every record (the all-records iteration,
Cache.records(), in image order with expiries) and the live entries
(iteration, len, `cache[key]`, the typed getter with the value and its
stored bytes, `type_of`, `expires`, `get_many`; an expired entry absent to
all of them but `expires`); the result of each listed lookup (with its
value) and of each listed batch (get_many's per-key answers). A delta
vector's tombstones are records (records() yields them as (key, None,
None)) absent to everything else, and its "delta" field is its base read
through it (shmkv.open(base, delta=...)): DeltaMismatch, or the same checks
of entries, lookups and batches. The vectors are made by the C builder (tests/vectors/gen_vectors); this reads them
from the tree."""
import json
import math
import os
import struct

import pytest
import shmkv

from conftest import TREE

VEC = os.path.join(TREE, 'tests', 'vectors')
RETIRED = "image format version 1 is retired: convert it with 'shmctl image upgrade OLD -o NEW'"


def check_manifest(m):
    """m, if it is a manifest this test knows (format, manifest_version 2 or
    3, image format 2); else ValueError naming what differs."""
    got = (m.get('format'), m.get('manifest_version'), m.get('image_format_version'))
    if got not in (('shmkv-conformance-vectors', 2, 2), ('shmkv-conformance-vectors', 3, 2)):
        raise ValueError(f"a manifest this test does not know: format, manifest_version, "
                         f"image_format_version = {got}")
    return m


def _manifest():
    with open(os.path.join(VEC, 'manifest.json'), encoding='utf-8') as f:
        return check_manifest(json.load(f))


def test_unknown_manifest_refused():
    m = _manifest()
    for change in ({'manifest_version': 1}, {'manifest_version': 4},
                   {'format': 'other'}, {'image_format_version': 3}):
        with pytest.raises(ValueError, match="does not know"):
            check_manifest(dict(m, **change))
    with pytest.raises(ValueError):
        check_manifest({'vectors': m['vectors']})


def test_manifest_shape():
    vs = _manifest()['vectors']
    assert len(vs) >= 50 and len({v['name'] + str(v['format']) for v in vs}) == len(vs)
    assert all(v['format'] in (1, 2) for v in vs)
    assert any(v['format'] == 1 for v in vs) and any(v.get('batches') for v in vs)
    deltas = [v for v in vs if 'delta' in v]
    assert len(deltas) >= 8 and {v['delta']['stack'] for v in deltas} == {'OK', 'SHMKV_EBASE'}
    assert all(v['open'] == 'SHMKV_EVERSION' and v['file'].startswith('v1/')
               for v in vs if v['format'] == 1)


def _vectors():
    return [pytest.param(v, id=f"v{v['format']}-{v['name']}") for v in _manifest()['vectors']]


def _verdict(path, **kw):
    try:
        c = shmkv.open(path, **kw)
    except shmkv.Error as e:
        return e.errname, None, e
    return 'OK', c, None


_PACK = {'i64': '<q', 'f64': '<d', 'f32list': '<f', 'f64list': '<d', 'i64list': '<q'}
_GETTER = {'bytes': 'get_bytes', 'string': 'get_str', 'i64': 'get_i64', 'bool': 'get_bool',
           'f64': 'get_f64', 'f32list': 'get_f32list', 'f64list': 'get_f64list',
           'i64list': 'get_i64list', 'strlist': 'get_strlist'}


def _same(got, want):
    """Whether a value read (got) is the manifest's value (want, in its
    encoding: bytes as hex, i64 as decimal strings, f32 to 9 digits)."""
    if isinstance(got, shmkv.Array):
        if got.typecode == 'f':
            want = [struct.unpack('<f', struct.pack('<f', x))[0] for x in want]
        elif got.typecode == 'q':
            want = [int(x) for x in want]
        return got.tolist() == want
    if isinstance(got, bytes):
        return got.hex() == want
    if isinstance(got, bool):
        return got is want
    if isinstance(got, int):
        return got == int(want)
    if isinstance(got, float):
        return (math.isnan(got) and math.isnan(want)) or \
            struct.pack('<d', got) == struct.pack('<d', want)
    return got == want


def _check_value(name, w, got):
    """got (a value read from the image) is the manifest entry w: typed value,
    element count and stored bytes (raw_hex; for numbers and lists their
    little-endian encoding, which also tells -0.0 from 0.0)."""
    t, where = w['type'], f"{name}: key {w['key_hex']}"
    assert _same(got, w['value']), where
    if t == 'bytes':
        assert isinstance(got, bytes) and got.hex() == w['raw_hex'] and len(got) == w['count']
    elif t == 'string':
        assert isinstance(got, str), where
        assert got.encode() == bytes.fromhex(w['raw_hex']) and len(got.encode()) == w['count']
    elif t == 'bool':
        assert isinstance(got, bool) and bytes([got]).hex() == w['raw_hex'], where
    elif t == 'strlist':
        assert isinstance(got, list) and len(got) == w['count'], where
    elif t in ('i64', 'f64'):
        assert type(got) is (int if t == 'i64' else float), where
        assert struct.pack(_PACK[t], got).hex() == w['raw_hex'], where
    else:  # f32list, f64list, i64list: a shmkv.Array read in place
        assert isinstance(got, shmkv.Array) and got.type == t and len(got) == w['count'], where
        assert bytes(memoryview(got)).hex() == w['raw_hex'], where


def _absent(e):
    """An entry no get finds: expired, or a delta's tombstone."""
    return e.get('expired', False) or e['type'] == 'tombstone'


def _check_entries(name, c, entries):
    keys = [bytes.fromhex(e['key_hex']) for e in entries]
    live = [(k, e) for k, e in zip(keys, entries) if not _absent(e)]

    def raw(k):
        return k.encode() if isinstance(k, str) else k
    # every record, expired ones too, in image order, with its expiry
    recs = list(c.records())
    assert [raw(k) for k, _, _ in recs] == keys, f"{name}: records()' keys"
    for (_, v, t), e in zip(recs, entries):
        if e['type'] == 'tombstone':  # no value fields: (key, None, None)
            assert v is None and t is None and 'value' not in e, f"{name}: {e['key_hex']}"
            continue
        _check_value(name, e, v)
        assert t == e.get('expires'), f"{name}: records()' expiry of {e['key_hex']}"
    # the default iteration and len: the live entries, in image order
    got = [(raw(k), v) for k, v in c.items()]
    assert [k for k, _ in got] == [k for k, _ in live], f"{name}: iteration's keys"
    for (_, v), (_, e) in zip(got, live):
        _check_value(name, e, v)
    assert len(c) == len(live) == len(c.keys()), f"{name}: len"
    assert [raw(k) for k in c] == [k for k, _ in live]
    for k, e in zip(keys, entries):
        where = f"{name}: key {e['key_hex']}"
        if e['type'] == 'tombstone':
            assert k not in c and c.get(k, 'absent') == 'absent', where + ' removed'
            for absent in (lambda: c[k], lambda: c.expires(k), lambda: c.type_of(k)):
                with pytest.raises(shmkv.NotFound):
                    absent()
            continue
        assert c.expires(k) == e.get('expires'), where
        if e.get('expired', False):
            assert k not in c and c.get(k, 'absent') == 'absent', where + ' expired'
            with pytest.raises(shmkv.NotFound, match="expired"):
                c[k]
            continue
        assert k in c and c.type_of(k) == e['type'], where
        _check_value(name, e, c[k])
        _check_value(name, e, getattr(c, _GETTER[e['type']])(k))
    many = c.get_many(keys + [b'no such key \x01'], default='absent')
    assert many[-1] == 'absent', name
    for k, e, v in zip(keys, entries, many):
        if _absent(e):
            assert v == 'absent', f"{name}: get_many of expired {e['key_hex']}"
        else:
            _check_value(name, e, v)


def _get(c, key):
    """A single get's result class (lib's lookup: type_of decodes nothing
    of the value, but the lookup itself refuses a string that is not
    UTF-8), and the value cache[key] reads, or the error reading it."""
    try:
        c.type_of(key)
    except shmkv.Error as e:
        return e.errname, None
    try:
        return 'OK', c[key]
    except shmkv.Error as e:
        return 'OK', e


def _plain(v):
    return v.tolist() if isinstance(v, shmkv.Array) else v


def _check_batch(name, c, b):
    keys = [bytes.fromhex(k) for k in b['keys_hex']]
    want = b['results']
    absent = object()
    failed = {i for i, r in enumerate(want) if r not in ('OK', 'SHMKV_ENOTFOUND')}
    where = f"{name}: batch {b['keys_hex']}"
    if failed:
        with pytest.raises(shmkv.Error) as e:
            c.get_many(keys, default=absent)
        assert sorted(e.value.errors) == sorted(failed), where
        first = min(failed)
        assert e.value.errors[first] is e.value and e.value.errname == want[first], where
        assert f"keys[{first}]" in str(e.value), where
        results = e.value.results
    else:
        results = c.get_many(keys, default=absent)
    for i, (k, r) in enumerate(zip(keys, want)):
        if r == 'OK':  # the single get's value
            assert results[i] is not absent and _plain(results[i]) == _plain(c[k]), (where, i)
        elif r == 'SHMKV_ENOTFOUND':
            assert results[i] is absent, (where, i)
        else:
            assert results[i] is absent and e.value.errors[i].errname == r, (where, i)


def _check_lookups(name, c, v):
    """The listed gets and batches of v (a vector, or its "delta" field) on c."""
    for g in v.get('gets', []):
        r, value = _get(c, bytes.fromhex(g['key_hex']))
        assert r == g['result'], f"{name}: get {g['key_hex']} says {r}, the manifest {g['result']}"
        if 'value' in g:
            assert _same(value, g['value']), f"{name}: get {g['key_hex']}: {value!r}"
        elif isinstance(value, shmkv.Error):
            # a strlist with a damaged string: C's get succeeds and refuses
            # the string when it is read; Python reads them all at the get
            assert isinstance(value, shmkv.CorruptImage), value
            assert c.type_of(bytes.fromhex(g['key_hex'])) == 'strlist', value
    for b in v.get('batches', []):
        _check_batch(name, c, b)


def _check_through(v, path, delta):
    """v's base read through its image (opened as delta): open(delta=)'s
    verdict, and set_delta's with the open Cache; then what it holds."""
    d = v['delta']
    name = f"{v['name']} (through, base {d['base']})"
    base = os.path.join(VEC, d['base'])
    got, c, err = _verdict(base, delta=path)
    assert got == d['stack'], f"{name}: {got} ({err}), the manifest {d['stack']}"
    with shmkv.open(base) as b:
        if got != 'OK':
            assert isinstance(err, shmkv.DeltaMismatch) and 'delta' in str(err), err
            with pytest.raises(shmkv.DeltaMismatch):
                b.set_delta(delta)
            assert b.delta is None  # unchanged
            return
        b.set_delta(delta)
        assert b.delta is delta and not b.is_delta and b.checksum == delta.delta_id.base_checksum
    with c:
        assert c.delta is not None and c.delta.is_delta
        if 'entries' in d:
            _check_entries(name, c, d['entries'])
        _check_lookups(name, c, d)
        c.set_delta(None)  # the base alone again
        assert c.delta is None


@pytest.mark.parametrize('v', _vectors())
def test_vector(v):
    path = os.path.join(VEC, v['file'])
    got, c, err = _verdict(path)
    assert got == v['open'], f"{v['name']}: open says {got}, the manifest {v['open']}"
    if v['format'] == 1:
        assert isinstance(err, shmkv.VersionMismatch) and RETIRED in str(err), str(err)
    if c is None:
        assert v['verify'] == '-'
        return
    with c:
        assert c.format == v['format'] == 2
        if v['verify'] == 'OK':  # a damaged image may open: its counts are not its entries
            _check_entries(v['name'], c, v['entries'])
        _check_lookups(v['name'], c, v)
        if 'delta' in v:
            _check_through(v, path, c)
    got, d, _ = _verdict(path, deep=True)
    if d is not None:
        d.close()
    assert got == v['verify'], f"{v['name']}: deep open says {got}, the manifest {v['verify']}"
