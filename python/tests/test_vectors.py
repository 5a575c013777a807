"""The shared conformance vectors (tests/vectors/README.md) through the Python
API: each image's verdict at open (flags 0: checksums on) and at a deep open
(open, then the full structural check), and for the accepted ones the entry
count and the listed hits and misses. The vectors are made by the C builder
(tests/vectors/gen_vectors); this reads them from the tree."""
import json
import os

import pytest
import shmkv

from conftest import TREE

VEC = os.path.join(TREE, 'tests', 'vectors')


def _vectors():
    with open(os.path.join(VEC, 'manifest.json'), encoding='utf-8') as f:
        return json.load(f)['vectors']


def _verdict(path, **kw):
    try:
        c = shmkv.open(path, **kw)
    except shmkv.Error as e:
        return e.errname, None
    return 'OK', c


@pytest.mark.parametrize('v', _vectors(), ids=lambda v: v['name'])
def test_vector(v):
    path = os.path.join(VEC, v['file'])
    got, c = _verdict(path)
    assert got == v['open'], f"{v['name']}: open says {got}, the manifest {v['open']}"
    if c is None:
        return
    with c:
        if v['verify'] == 'OK':  # a damaged image may open: its counts are not its entries
            assert len(c) == len(v['entries'])
            for g in v.get('gets', []):
                if g['result'] in ('OK', 'SHMKV_ENOTFOUND'):
                    key = bytes.fromhex(g['key_hex'])
                    assert (key in c) == (g['result'] == 'OK'), (v['name'], g)
    got, d = _verdict(path, deep=True)
    if d is not None:
        d.close()
    assert got == v['verify'], f"{v['name']}: deep open says {got}, the manifest {v['verify']}"
