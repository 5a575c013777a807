"""Typed use of shmkv that a type checker must accept as written, with the
types it must infer (assert_type); tests/test_typing.py runs mypy --strict
over it. No cast anywhere: the typed getters say what they return."""
import datetime
from typing import Literal

from typing_extensions import assert_type

import shmkv
from shmkv.spark import build_dataframe


def read(cache: shmkv.Cache) -> float:
    name = cache.get_str("user:1:name")
    assert_type(name, str)
    assert_type(cache.get_bytes("b"), bytes)
    assert_type(cache.get_i64("age"), int)
    assert_type(cache.get_f64("score"), float)
    assert_type(cache.get_bool("admin"), bool)
    assert_type(cache.get_strlist("tags"), list[str])
    emb = cache.get_f32list("user:1:embedding")
    assert_type(emb, shmkv.Array[float])
    assert_type(emb[0], float)
    assert_type(emb.tolist(), list[float])
    ids = cache.get_i64list("ids")
    assert_type(ids[0], int)
    assert_type(sum(ids), int)
    assert_type(cache.get_f64list("d").tolist(), list[float])
    assert_type(cache.expires("k"), int | None)
    assert_type(cache.get("k", 0), shmkv._Value | int)
    for key, value in cache.items():
        assert_type(key, str | bytes)
    assert_type(list(cache.keys()), list[str | bytes])
    for key, value, expires in cache.records():
        assert_type(expires, int | None)
    assert_type(len(cache), int)
    assert_type(cache.get_many(["a", b"b"], default=0), list[shmkv._Value | int])
    return emb[0] + ids[0] + cache.get_f64("score")


def build(path: str) -> int:
    stats = shmkv.build(path, [("a", 1), ("b", [0.5], "f32list")], created=1700000000,
                        threads=2, on_duplicate="last", type="f32list",
                        expires=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc))
    shmkv.build_file(path, ["in.tsv"], format="tsv", tsv_expires=True, memory_limit=1 << 30)
    shmkv.join(path, ["a.shmkv", "b.shmkv"], tmpdir="/tmp")
    shmkv.upgrade("old.shmkv", path, threads=4, memory_limit=None)
    shmkv.build("d1.shmkv", [("a", 2), ("b", shmkv.REMOVE)], delta_of=path)
    shmkv.build_file("d2.shmkv", "d.tsv", delta_of=path, after="d1.shmkv", tsv_removes=True)
    shmkv.apply(path, ["d1.shmkv", "d2.shmkv"], "new.shmkv", as_delta=False, threads=2)
    shmkv.diff(path, "new.shmkv", "d.shmkv", tmpdir="/tmp")
    assert_type(shmkv.REMOVE, Literal[shmkv.Remove.REMOVE])
    build_dataframe(None, path, parts=4, buckets=100, workdir="/tmp/w", seed=7, name="n")
    n = stats["entries"]
    assert isinstance(n, int)
    return n


with shmkv.open("users.shmkv") as c:
    read(c)
