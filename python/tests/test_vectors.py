"""The shared conformance vectors (tests/vectors/README.md) through the Python
API, format 1 (`vectors`) and format 2 (`vectors_v2`) alike: each image's
verdict at open (flags 0: checksums on) and at a deep open (open, then the
full structural check), its format version; for the images verify accepts,
every entry (iteration in image order, `cache[key]` and the typed getter
with the value and its stored bytes, `type_of`, `expires`, `get_many`; an
expired entry absent to all of them but `expires`); and the result of each
listed lookup, errors included (`SHMKV_ECORRUPT`). The vectors are made by
the C builder (tests/vectors/gen_vectors); this reads them from the tree."""
import json
import math
import os
import struct
import time

import pytest
import shmkv

from conftest import TREE

VEC = os.path.join(TREE, 'tests', 'vectors')


def _manifest():
    with open(os.path.join(VEC, 'manifest.json'), encoding='utf-8') as f:
        m = json.load(f)
    assert (m['format'], m['manifest_version']) == ('shmkv-conformance-vectors', 1), \
        "a manifest this test does not know"
    return m


def _vectors():
    m = _manifest()
    return [pytest.param(f, v, id=v['name'])
            for f, a in ((1, 'vectors'), (2, 'vectors_v2')) for v in m[a]]


def test_manifest_has_both_formats():
    m = _manifest()
    assert len(m['vectors']) >= 30 and len(m['vectors_v2']) >= 30
    assert all(v['format'] == 1 for v in m['vectors'])
    assert all(v['format'] == 2 and v['file'].startswith('v2/') for v in m['vectors_v2'])


def _verdict(path, **kw):
    try:
        c = shmkv.open(path, **kw)
    except shmkv.Error as e:
        return e.errname, None
    return 'OK', c


def _lookup(c, key):
    """The class of a lookup's result: type_of looks the key up and decodes
    nothing of the value (a get of a damaged strlist or of a string that is
    not UTF-8 succeeds in C; decoding it is another matter)."""
    try:
        c.type_of(key)
    except shmkv.Error as e:
        return e.errname
    return 'OK'


_PACK = {'i64': '<q', 'f64': '<d', 'f32list': '<f', 'f64list': '<d', 'i64list': '<q'}
_GETTER = {'bytes': 'get_bytes', 'string': 'get_str', 'i64': 'get_i64', 'bool': 'get_bool',
           'f64': 'get_f64', 'f32list': 'get_f32list', 'f64list': 'get_f64list',
           'i64list': 'get_i64list', 'strlist': 'get_strlist'}


def _check_value(name, w, got):
    """got (a value read from the image) is the manifest entry w: typed value,
    element count and stored bytes (raw_hex; for numbers and lists their
    little-endian encoding, which also tells -0.0 from 0.0)."""
    t, want, where = w['type'], w['value'], f"{name}: key {w['key_hex']}"
    if t == 'bytes':
        assert isinstance(got, bytes) and got.hex() == want == w['raw_hex'], where
        assert len(got) == w['count'], where
    elif t == 'string':
        assert isinstance(got, str) and got == want, where
        assert got.encode() == bytes.fromhex(w['raw_hex']) and len(got.encode()) == w['count'], where
    elif t == 'bool':
        assert isinstance(got, bool) and got == want and bytes([got]).hex() == w['raw_hex'], where
    elif t == 'strlist':
        assert isinstance(got, list) and got == want and len(got) == w['count'], where
    elif t in ('i64', 'f64'):
        assert type(got) is (int if t == 'i64' else float), where
        assert struct.pack(_PACK[t], got).hex() == w['raw_hex'], where
        if t == 'i64':
            assert got == int(want), where
        else:
            assert got == want or (math.isnan(got) and math.isnan(want)), where
    else:  # f32list, f64list, i64list: a shmkv.Array read in place
        assert isinstance(got, shmkv.Array) and got.type == t and len(got) == w['count'], where
        assert bytes(memoryview(got)).hex() == w['raw_hex'], where
        if t == 'i64list':
            want = [int(x) for x in want]
        elif t == 'f32list':  # the manifest's 9 digits name one f32
            want = [struct.unpack('<f', struct.pack('<f', x))[0] for x in want]
        assert got.tolist() == want, where


def _check_entries(name, c, entries):
    now = time.time()
    keys = [bytes.fromhex(e['key_hex']) for e in entries]
    live = [(k, e) for k, e in zip(keys, entries) if 'expires' not in e or now < e['expires']]
    assert len(c) == len(entries), f"{name}: len {len(c)}, the manifest {len(entries)}"
    # iteration: every entry in image order, expired ones skipped (python/README.md)
    got = [(k.encode() if isinstance(k, str) else k, v) for k, v in c.items()]
    assert [k for k, _ in got] == [k for k, _ in live], f"{name}: iteration's keys"
    for (_, v), (_, e) in zip(got, live):
        _check_value(name, e, v)
    for k, e in zip(keys, entries):
        where = f"{name}: key {e['key_hex']}"
        assert c.expires(k) == e.get('expires'), where
        if (k, e) not in live:
            assert k not in c and c.get(k, 'absent') == 'absent', where + ' expired'
            with pytest.raises(shmkv.NotFound):
                c[k]
            continue
        assert k in c and c.type_of(k) == e['type'], where
        _check_value(name, e, c[k])
        _check_value(name, e, getattr(c, _GETTER[e['type']])(k))
    many = c.get_many(keys + [b'no such key \x01'], default='absent')
    assert many[-1] == 'absent', name
    for k, e, v in zip(keys, entries, many):
        if (k, e) in live:
            _check_value(name, e, v)
        else:
            assert v == 'absent', f"{name}: get_many of expired {e['key_hex']}"


@pytest.mark.parametrize('fmt,v', _vectors())
def test_vector(fmt, v):
    assert v['format'] == fmt
    path = os.path.join(VEC, v['file'])
    got, c = _verdict(path)
    assert got == v['open'], f"{v['name']}: open says {got}, the manifest {v['open']}"
    if c is None:
        return
    with c:
        assert c.format == fmt, f"{v['name']}: format {c.format}, the manifest {fmt}"
        if v['verify'] == 'OK':  # a damaged image may open: its counts are not its entries
            _check_entries(v['name'], c, v['entries'])
        for g in v.get('gets', []):
            r = _lookup(c, bytes.fromhex(g['key_hex']))
            assert r == g['result'], f"{v['name']}: get {g['key_hex']} says {r}, the manifest {g['result']}"
    got, d = _verdict(path, deep=True)
    if d is not None:
        d.close()
    assert got == v['verify'], f"{v['name']}: deep open says {got}, the manifest {v['verify']}"
