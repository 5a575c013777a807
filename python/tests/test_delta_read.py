"""Reading an image through a delta image (lib/FORMAT.md section 19):
shmkv.open(base, delta=...), Cache.set_delta, what every read answers
through it, a delta read alone, and the refusals (DeltaMismatch). The
images are the shared conformance vectors' (tests/vectors/README.md):
delta_base.img and its deltas, made by the C builder."""
import gc
import os

import pytest
import shmkv

from conftest import TREE

VEC = os.path.join(TREE, 'tests', 'vectors')
BASE = os.path.join(VEC, 'delta_base.img')
DELTA = os.path.join(VEC, 'delta.img')
LONG = 'K' + ''.join(chr(ord('a') + (i * 5 + 300) % 26) for i in range(1, 300))


@pytest.fixture
def through():
    with shmkv.open(BASE, delta=DELTA) as c:
        yield c


def test_gets_answer_through_the_delta(through):
    c = through
    assert c['a'] == 1 and c.get_i64('a') == 1 and c.type_of('a') == 'i64'  # another type
    assert c['b'] == 'was an i64' and c.get_str('b') == 'was an i64'
    assert c['c'] is False
    assert c['d'] == b'\xd1' * 300                      # an OUT upsert over an OUT value
    assert c['new'] == 'added' and c.get_strlist('new/list') == ['x', 'yz']
    assert c['kept'].tolist() == [1.5, -2.0]             # not in the delta: the base's
    assert c['expired'] == 'renewed' and c.expires('expired') == 4000000000
    for gone in ('gone', '', LONG, 'never there', 'new/expired', 'live/exp'):
        assert gone not in c and c.get(gone) is None
        with pytest.raises(shmkv.NotFound):
            c[gone]
    # an upsert that expired hides the base's live record, and says so
    with pytest.raises(shmkv.NotFound, match='expired') as e:
        c['live/exp']
    assert e.value.expires == 1000000000
    with pytest.raises(shmkv.NotFound):
        c.expires('gone')
    assert c.get_many(['a', 'gone', 'kept/out', 'live/exp'], default=0) == [1, 0, 'k' * 150, 0]


def test_iteration_and_len_through_the_delta(through):
    c = through
    keys = list(c)
    # the delta's live upserts first (its image order), then the base's
    # records the delta does not hold
    assert set(keys) == {'a', 'b', 'c', 'd', 'new', 'new/out', 'new/list', 'new/live',
                         'expired', 'kept', 'kept/out'} | {k for k in keys if k.startswith('probe/')}
    assert keys.index('new') < keys.index('kept') and keys.index('a') < keys.index('kept')
    assert len(c) == len(keys) == len(c.keys()) == 13
    assert dict(c.items())['a'] == 1
    recs = {k: (v, t) for k, v, t in c.records()}
    assert recs['live/exp'] == ('expired upsert', 1000000000)  # every record, expired too
    assert 'gone' not in recs and len(recs) == 15


def test_set_delta_and_back():
    with shmkv.open(BASE) as c, shmkv.open(DELTA) as d:
        assert c.delta is None and c['a'] == 'base a'
        n = len(c)
        c.set_delta(d)
        assert c.delta is d and c['a'] == 1
        assert repr(c).endswith(f"through {DELTA!r}>")
        it = iter(c.items())
        first = next(it)
        c.set_delta(None)  # the base alone again; the iterator reads what it started on
        assert c.delta is None and c['a'] == 'base a' and c['gone'] == 'removed by the delta'
        assert len(c) == n
        rest = list(it)
        assert len(rest) + 1 == 13 and first[0] not in dict(rest)
        c.set_delta(DELTA)  # a path: opened with the default checks
        assert c['a'] == 1 and c.delta.is_delta and c.delta.path == DELTA


def test_delta_stays_mapped_while_set():
    c = shmkv.open(BASE)
    d = shmkv.open(DELTA)
    c.set_delta(d)
    d.close()  # the Cache closes; its mapping stays while c reads it
    del d
    gc.collect()
    assert c['new/out'] == 'n' * 180 and c.get_strlist('new/list') == ['x', 'yz']
    c.close()


def test_delta_read_alone():
    with shmkv.open(DELTA) as d, shmkv.open(BASE) as b:
        assert d.is_delta and not b.is_delta and b.delta_id is None
        assert d.delta_id == shmkv.DeltaId(b.checksum, os.path.getsize(BASE), 0, 1)
        assert d.delta_id.base_checksum == b.checksum and d.checksum != b.checksum
        assert d['a'] == 1 and 'gone' not in d and 'kept' not in d
        recs = list(d.records())
        tombs = {k for k, v, t in recs if v is None}
        assert tombs == {'gone', '', LONG, 'never there', 'Z' + ''.join(
            chr(ord('a') + (i * 5 + 280) % 26) for i in range(1, 280))}
        assert all(t is None for k, v, t in recs if k in tombs)
        # len: the live upserts (the header's entry_count counts tombstones)
        assert len(d) == len(list(d)) == len(recs) - len(tombs) - 2  # two expired upserts


@pytest.mark.parametrize('base, delta, why', [
    ('base.img', 'delta.img', 'applies to the image with checksum'),  # another image
    ('delta_base.img', 'delta_chain_2.img', 'merge'),   # prev != 0: a chain is merged first
    ('delta_base.img', 'delta_other_seed.img', 'seed'),
    ('delta_base.img', 'base.img', 'not a delta'),      # a plain image as the delta
    ('delta.img', 'delta_as_base.img', 'through another delta'),  # a delta as the base
])
def test_delta_mismatch(base, delta, why):
    b, d = os.path.join(VEC, base), os.path.join(VEC, delta)
    with pytest.raises(shmkv.DeltaMismatch, match=why) as e:
        shmkv.open(b, delta=d)
    assert isinstance(e.value, shmkv.Error) and e.value.errname == 'SHMKV_EBASE'
    assert e.value.code == -31215 and base in str(e.value) and delta in str(e.value)
    with shmkv.open(b) as c:
        before = list(c.records())
        with pytest.raises(shmkv.DeltaMismatch):
            c.set_delta(d)
        assert c.delta is None and list(c.records()) == before  # unchanged


def test_set_delta_refusals():
    with shmkv.open(BASE) as c:
        with pytest.raises(TypeError, match='a Cache, a path or None'):
            c.set_delta(42)
        d = shmkv.open(DELTA)
        d.close()
        with pytest.raises(ValueError, match='closed'):
            c.set_delta(d)
        with pytest.raises(shmkv.OSFailure):
            c.set_delta(os.path.join(VEC, 'no such file.img'))
        assert c.delta is None
    with pytest.raises(ValueError, match='closed'):
        c.set_delta(DELTA)
    with pytest.raises(shmkv.CorruptImage):  # a damaged delta is refused at its open
        shmkv.open(BASE, delta=os.path.join(VEC, 'delta_flag_clear.img'))
