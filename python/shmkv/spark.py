"""shmkv.spark: build one image from a Spark DataFrame (or RDD) of records on
the executors (python/README.md, "Spark"; builder/README.md, "Partitioned
builds").

    from shmkv.spark import build_dataframe
    build_dataframe(df, "/shared/feat.shmkv", parts=64, buckets=B,
                    workdir="/shared/frags", created=1700000000)

Each record goes to the part that holds its key (shmkv.part_of), each part is
built into a fragment by shmkv.build(part=(k, n), buckets=B) on an executor,
in the records' input order (so on_duplicate first/last mean what they mean
in one build), and the driver joins the fragments (shmkv.join): the image is
byte-identical to shmkv.build of all the records. workdir must be visible to
the executors and the driver (a shared filesystem on a real cluster).
pyspark is imported by the caller; this module needs only the DataFrame.
"""
from __future__ import annotations

from typing import Any

import shmkv
from shmkv import _parts


def build_dataframe(df: Any, out: str, *, parts: int, buckets: int, workdir: str,
                    key: str = "key", value: str = "value", type: str | None = None,
                    created: int | None = None, seed: int | None = None,
                    name: str | None = None, dedup: bool | None = None,
                    on_duplicate: str = "error", lossy_f32: bool = False,
                    threads: int = 1, memory_limit: int | None = None,
                    format: int | None = None, expires: str | None = None,
                    keep_fragments: bool = False) -> dict[str, Any]:
    """Builds the image `out` from df's columns key, value (and type, a column
    of type names, and expires, a column of expiry times, if given) on the
    executors; returns join()'s statistics. format is shmkv.build's (1 or 2;
    every fragment and so the joined image has it); the expires column
    holds Unix seconds (int) or None (never), and needs format 2 (the default): Spark gives
    TimestampType values as naive local datetimes, which shmkv.build refuses,
    so convert such a column first (F.unix_timestamp(col) or
    col.cast("long")). Also takes an RDD of (key, value), (key, value, type)
    or (key, value, type, expires) tuples."""
    rdd = df.rdd if hasattr(df, "rdd") else df
    j = _parts.job(parts, buckets, workdir, created=created, seed=seed, name=name,
                   dedup=dedup, on_duplicate=on_duplicate, lossy_f32=lossy_f32,
                   threads=threads, memory_limit=memory_limit, format=format)
    n, kcol, vcol, tcol, ecol = j.n, key, value, type, expires

    def as_record(r: Any) -> tuple:
        if hasattr(r, "asDict"):
            return (r[kcol], r[vcol], r[tcol] if tcol else None, r[ecol] if ecol else None)
        return (r[0], r[1], r[2] if len(r) > 2 else None, r[3] if len(r) > 3 else None)

    def keyed(pair: tuple) -> tuple:
        rec, index = pair
        return ((j.part_of(rec[0]), index), rec)

    def build_part(index: int, it: Any) -> Any:
        yield (index + 1, j.build(index + 1, (rec for _, rec in it)))

    frags = (rdd.map(as_record).zipWithIndex().map(keyed)
             .repartitionAndSortWithinPartitions(n, lambda pk: pk[0] - 1)
             .mapPartitionsWithIndex(build_part).collect())
    frags.sort()
    if [k for k, _ in frags] != list(range(1, n + 1)):
        raise shmkv.BuildError(f"spark: fragments {sorted(k for k, _ in frags)} came back, "
                               f"not 1..{n}")
    return _parts.join(out, [p for _, p in frags], memory_limit=memory_limit,
                       keep_fragments=keep_fragments)
