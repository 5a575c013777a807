"""shmkv._parts: what shmkv.spark and shmkv.dask share (private): the build
options fixed once on the driver, the fragments' names and builds on the
workers, and the join that ends a partitioned build (python/README.md,
"Spark and Dask")."""
from __future__ import annotations

import os
import time
from typing import Any, Iterable, NamedTuple

import shmkv
from shmkv._options import FragmentOptions, JoinOptions, options


class Job(NamedTuple):
    """One partitioned build: pickled into the workers' tasks."""
    n: int
    buckets: int
    seed: int  # the hash seed part_of uses (shmkv.DEFAULT_SEED for None)
    workdir: str
    opts: dict[str, Any]  # shmkv.build's options, the same for every fragment

    def part_of(self, key: Any) -> int:
        return shmkv.part_of(key, self.buckets, self.n, seed=self.seed)

    def path(self, k: int) -> str:
        return os.path.join(self.workdir, f"part-{k:05d}-of-{self.n:05d}.shmkv")

    def build(self, k: int, records: Iterable[Any]) -> str:
        """Builds part k's fragment of records (in their order); its path."""
        path = self.path(k)
        shmkv.build(path, records, part=(k, self.n), buckets=self.buckets, **self.opts)
        return path


def job(parts: int, buckets: int, workdir: str, given: dict[str, Any]) -> Job:
    """The Job of build_dataframe's arguments (given: its FragmentOptions
    keywords); makes workdir. A fragment's build runs one thread unless
    threads says otherwise: an executor or a worker is one task of many."""
    opts = options(FragmentOptions, {"threads": 1, **given}, "build_dataframe")
    # fixed once on the driver: every fragment and the join agree on it
    if opts["created"] is None:
        opts["created"] = int(time.time())
    n, b = int(parts), int(buckets)
    os.makedirs(workdir, exist_ok=True)
    seed = shmkv.DEFAULT_SEED if opts["seed"] is None else opts["seed"]
    return Job(n, b, seed, workdir, opts)


def join(j: Job, out: str, frags: list[str], *, keep_fragments: bool) -> dict[str, Any]:
    """shmkv.join of the fragments (parts 1..n in order) into out, with the
    job's join options but threads (the join runs on the driver: every CPU
    by default); the fragments are then removed unless keep_fragments,
    whether the join worked or not."""
    jo = {k: j.opts[k] for k in JoinOptions.__annotations__ if k != "threads"}
    try:
        return shmkv.join(out, frags, **jo)
    finally:
        if not keep_fragments:
            for p in frags:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
