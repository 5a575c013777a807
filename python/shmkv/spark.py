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

from typing import TYPE_CHECKING, Any

import shmkv
from shmkv import _parts
from shmkv._options import FragmentOptions, describe

if TYPE_CHECKING:
    from typing_extensions import Unpack


def build_dataframe(df: Any, out: str, *, parts: int, buckets: int, workdir: str,
                    key: str = "key", value: str = "value", type: str | None = None,
                    expires: str | None = None, keep_fragments: bool = False,
                    **kw: Unpack[FragmentOptions]) -> dict[str, Any]:
    """Builds the image `out` from df's columns key, value (and type, a column
    of type names, and expires, a column of expiry times, if given) on the
    executors; returns join()'s statistics. The expires column holds Unix
    seconds (int) or None (never): Spark gives TimestampType values as naive
    local datetimes, which shmkv.build refuses, so convert such a column
    first (F.unix_timestamp(col) or col.cast("long")). Also takes an RDD of
    (key, value), (key, value, type) or (key, value, type, expires) tuples.
    keep_fragments=True leaves the fragments in workdir.

    The other keywords are the options every fragment's shmkv.build and the
    join share (FragmentOptions; created, when None, is fixed once on the
    driver; each fragment's build runs threads=1 unless told):
    """
    rdd = df.rdd if hasattr(df, "rdd") else df
    j = _parts.job(parts, buckets, workdir, dict(kw))
    n, kcol, vcol, tcol, ecol = j.n, key, value, type, expires

    def as_record(r: Any) -> tuple[Any, ...]:
        if hasattr(r, "asDict"):
            return (r[kcol], r[vcol], r[tcol] if tcol else None, r[ecol] if ecol else None)
        return (r[0], r[1], r[2] if len(r) > 2 else None, r[3] if len(r) > 3 else None)

    def keyed(pair: tuple[Any, ...]) -> tuple[Any, ...]:
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
    return _parts.join(j, out, [p for _, p in frags], keep_fragments=keep_fragments)


build_dataframe.__doc__ = (build_dataframe.__doc__ or "") + describe(FragmentOptions)
