"""shmkv.dask: build one image from a Dask DataFrame of records on the
workers (python/README.md, "Spark and Dask"; builder/README.md,
"Partitioned builds from PySpark").

    from shmkv.dask import build_dataframe
    build_dataframe(ddf, "/shared/feat.shmkv", parts=64, buckets=B,
                    workdir="/shared/frags", created=1700000000)

Each row is tagged with its part (shmkv.part_of) and its input position,
the frame is shuffled on the part (every row of a part in one partition),
each part is built into a fragment by shmkv.build(part=(k, n), buckets=B) on
a worker, in input order, and the client joins the fragments (shmkv.join):
the image is byte-identical to shmkv.build of all the rows. Parts without
rows get an empty fragment. workdir must be visible to the workers and the
client. Needs dask[dataframe] (pandas) and numpy. A value column of lists is
an object column: set dask.config.set({"dataframe.convert-string": False})
before making the frame, or dask turns the lists into strings.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import shmkv
from shmkv import _parts
from shmkv._options import FragmentOptions, describe

if TYPE_CHECKING:
    from typing_extensions import Unpack


def build_dataframe(ddf: Any, out: str, *, parts: int, buckets: int, workdir: str,
                    key: str = "key", value: str = "value", type: str | None = None,
                    expires: str | None = None, keep_fragments: bool = False,
                    **kw: Unpack[FragmentOptions]) -> dict[str, Any]:
    """Builds the image `out` from ddf's columns key, value (and type, a
    column of type names, and expires, a column of expiry times, if given) on
    the workers; returns join()'s statistics. The expires column holds Unix
    seconds (int), aware datetimes (pandas Timestamps with a zone) or None
    (never). keep_fragments=True leaves the fragments in workdir.

    The other keywords are the options every fragment's shmkv.build and the
    join share (FragmentOptions; created, when None, is fixed once on the
    client; each fragment's build runs threads=1 unless told):
    """
    import numpy as np
    import pandas as pd

    j = _parts.job(parts, buckets, workdir, dict(kw))
    n = j.n
    cols = [key, value] + ([type] if type else []) + ([expires] if expires else [])

    def tag(pdf: Any, partition_info: Any = None) -> Any:
        pdf = pdf[cols].copy()
        i = partition_info["number"] if partition_info else 0
        pdf["_shmkv_seq"] = np.arange(len(pdf), dtype="int64") + (i << 40)
        pdf["_shmkv_part"] = np.array([j.part_of(k) for k in pdf[key]], dtype="int64")
        return pdf

    def build_parts(pdf: Any) -> Any:
        done = []
        for k, g in pdf.groupby("_shmkv_part", sort=True):
            g = g.sort_values("_shmkv_seq", kind="stable")
            cs = [g[c].tolist() for c in cols]
            if expires and not type:  # (key, value, type, expires): no type given
                cs.insert(2, [None] * len(g))
            done.append((int(k), j.build(int(k), zip(*cs))))
        return pd.DataFrame(done, columns=["part", "path"]).astype({"part": "int64",
                                                                    "path": object})

    meta = tag(ddf._meta)
    frames = ddf.map_partitions(tag, meta=meta).shuffle("_shmkv_part", npartitions=n)
    built = frames.map_partitions(
        build_parts, meta=pd.DataFrame({"part": pd.Series(dtype="int64"),
                                        "path": pd.Series(dtype=object)})).compute()
    have = dict(zip(built["part"], built["path"]))
    if len(have) != len(built):
        raise shmkv.BuildError("dask: a part was built twice (the shuffle split it)")
    for k in range(1, n + 1):  # parts without rows: empty fragments
        if k not in have:
            have[k] = j.build(k, [])
    return _parts.join(j, out, [have[k] for k in range(1, n + 1)],
                       keep_fragments=keep_fragments)


build_dataframe.__doc__ = (build_dataframe.__doc__ or "") + describe(FragmentOptions)
