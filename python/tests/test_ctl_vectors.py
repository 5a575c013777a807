"""The shared control-segment vectors (tests/vectors/README.md,
"Control-segment vectors") through shmkv.attach: each case's files copied
into a private directory (mode 0700) with the modes its manifest names,
the @DIR@ paths of its control segment substituted, then attach (with and
without verify): the verdict (the error's errname), and for an accepted
case its generation and listed lookups. The vectors are made by
tests/vectors/gen_ctl_vectors; this reads them from the tree."""
import json
import os
import tempfile
from typing import Any

import pytest
import shmkv

from conftest import TREE

VEC = os.path.join(TREE, 'tests', 'vectors')
CTL = os.path.join(VEC, 'ctl')


def _manifest() -> dict[str, Any]:
    with open(os.path.join(CTL, 'manifest.json'), encoding='utf-8') as f:
        m: dict[str, Any] = json.load(f)
    got = (m.get('format'), m.get('manifest_version'))
    if got != ('shmkv-ctl-vectors', 1) or not m.get('dir_token'):
        raise ValueError(f"a control-segment manifest this test does not know: {got}")
    return m


MANIFEST = _manifest()


def substitute(ctl: bytearray, token: bytes, root: bytes) -> None:
    """The substitution rule: a path field that starts with token takes root
    in its place, NUL-padded to 224 bytes."""
    for i in range(8):
        at = 128 + 256 * i + 32
        if len(ctl) < at + 224 or not ctl[at:at + 224].startswith(token):
            continue
        rest = bytes(ctl[at + len(token):at + 224]).split(b'\0', 1)[0]
        path = root + rest
        assert len(path) < 224, f"the path {path!r} does not fit 224 bytes with its NUL"
        ctl[at:at + 224] = path.ljust(224, b'\0')


def _write(path: str, data: bytes, mode: str) -> None:
    with open(path, 'wb') as f:
        f.write(data)
    os.chmod(path, int(mode, 8))


def _class(e: BaseException) -> str:
    return getattr(e, 'errname', None) or repr(e)


def test_manifest_shape() -> None:
    cs = MANIFEST['cases']
    assert len(cs) >= 40 and len({c['name'] for c in cs}) == len(cs)
    assert any(c['attach'] == 'OK' for c in cs) and any(c['attach'] != 'OK' for c in cs)


@pytest.mark.parametrize('case', MANIFEST['cases'], ids=lambda c: c['name'])
@pytest.mark.parametrize('verify', [False, True])
def test_ctl_vector(case: dict[str, Any], verify: bool) -> None:
    with tempfile.TemporaryDirectory(prefix='shmkv-ctlvec.') as root:  # mode 0700
        for f in case['files']:
            with open(os.path.join(VEC, f['from']), 'rb') as src:
                _write(os.path.join(root, f['name']), src.read(), f['mode'])
        with open(os.path.join(CTL, case['ctl']), 'rb') as src:
            ctl = bytearray(src.read())
        substitute(ctl, MANIFEST['dir_token'].encode(), os.fsencode(root))
        _write(os.path.join(root, case['name'] + '.ctl'), bytes(ctl), case['ctl_mode'])
        where = f"{case['name']}: {case['about']}"
        try:
            cache = shmkv.attach(case['name'], root, verify=verify)
        except shmkv.Error as e:
            assert _class(e) == case['attach'], f"{where}: {e}"
            return
        with cache:
            assert case['attach'] == 'OK', where
            assert cache.generation == case['generation'], where
            for g in case['gets']:
                key = bytes.fromhex(g['key_hex'])
                try:
                    got = cache[key]
                except shmkv.Error as e:
                    assert _class(e) == g['result'], (where, key, e)
                    continue
                assert g['result'] == 'OK', (where, key, got)
                want: Any = int(g['value']) if g['type'] == 'i64' else g['value']
                assert type(got) is type(want) and got == want, (where, key, got)
