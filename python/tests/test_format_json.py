"""The package against lib/format.json, the one machine-readable description
of the format's constants. The package keeps no format constants of its own
(lib/, compiled in, reads the images); what it does state: the error classes'
codes and names, the value type names build() takes (shmkv/_options.py's
TypeName), the key length limit; this fails on any difference."""
import json
import os
import typing

import pytest
import shmkv
from shmkv import _options

from conftest import TREE


@pytest.fixture(scope="module")
def fmt():
    with open(os.path.join(TREE, "lib", "format.json"), encoding="utf-8") as f:
        return json.load(f)


CLASSES = {
    "ENOTFOUND": shmkv.NotFound, "ETYPE": shmkv.TypeMismatch, "EKEYLEN": shmkv.KeyTooLong,
    "ECORRUPT": shmkv.CorruptImage, "EVERSION": shmkv.VersionMismatch,
    "EDUPKEY": shmkv.DuplicateKey, "EINPUT": shmkv.BuildError, "ESTALE": shmkv.StaleCache,
}


def test_error_classes(fmt):
    for name, cls in CLASSES.items():
        assert cls.code == fmt["errors"][name] and cls.errname == "SHMKV_" + name, name
    for name, code in fmt["errors"].items():  # every code has its name and message
        assert shmkv._shmkv._errname(code)[0] == "SHMKV_" + name


def test_type_names(fmt):
    names = {t["name"] for t in fmt["types"]}
    assert set(typing.get_args(_options.TypeName)) == names | {"str"}


def test_key_length_limit(fmt, tmp_path):
    n = fmt["limits"]["max_key_len"]
    p = tmp_path / "k.shmkv"
    shmkv.build(p, [("k" * n, 1)])
    with shmkv.open(p) as c:
        assert c["k" * n] == 1
        with pytest.raises(shmkv.KeyTooLong):
            c["k" * (n + 1)]
    with pytest.raises(shmkv.BuildError):
        shmkv.build(tmp_path / "x.shmkv", [("k" * (n + 1), 1)])
