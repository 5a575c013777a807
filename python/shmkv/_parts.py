"""shmkv._parts: what shmkv.spark and shmkv.dask share (private): the build
options fixed once on the driver, the fragments' names and builds on the
workers, and the join that ends a partitioned build (python/README.md,
"Spark and Dask")."""
from __future__ import annotations

import os
import time
from typing import Any, Iterable, NamedTuple

import shmkv


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
        shmkv.build(path, records, part=(k, self.n), **self.opts)
        return path


def job(parts: int, buckets: int, workdir: str, *, created: int | None, seed: int | None,
        name: str | None, dedup: bool | None, on_duplicate: str, lossy_f32: bool,
        threads: int, memory_limit: int | None, format: int | None = None) -> Job:
    """The Job of build_dataframe's arguments; makes workdir."""
    n, b = int(parts), int(buckets)
    # fixed once on the driver: every fragment and the join agree on them
    opts = dict(created=int(time.time()) if created is None else created, seed=seed,
                name=name, dedup=dedup, on_duplicate=on_duplicate, lossy_f32=lossy_f32,
                threads=threads, memory_limit=memory_limit, buckets=b, format=format)
    os.makedirs(workdir, exist_ok=True)
    return Job(n, b, shmkv.DEFAULT_SEED if seed is None else seed, workdir, opts)


def join(out: str, frags: list[str], *, memory_limit: int | None,
         keep_fragments: bool) -> dict[str, Any]:
    """shmkv.join of the fragments (parts 1..n in order), which are then
    removed unless keep_fragments, whether the join worked or not."""
    try:
        return shmkv.join(out, frags, memory_limit=memory_limit)
    finally:
        if not keep_fragments:
            for p in frags:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
