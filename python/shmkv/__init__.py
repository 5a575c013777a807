"""shmkv: read shmkv images zero-copy, and build them, from Python.

Reading (lib/shmkv.h, compiled into this package):

    import shmkv
    with shmkv.open("features.shmkv") as cache:      # an image file
        vec = cache["user:42"]                        # shmkv.Array, zero-copy
        numpy.asarray(vec)                            # shares the image's memory
    cache = shmkv.attach("features")                  # a cache served by shmkv-loader
    cache.refresh()                                   # move to the newest generation

Building (libshmkv-build, the builder `shmctl image build` uses):

    shmkv.build("out.shmkv", [("user:42", [0.5, 1.0]), ...])
    shmkv.build_file("out.shmkv", "records.jsonl")
    shmkv.join("all.shmkv", ["frag1.shmkv", "frag2.shmkv"])

python/README.md has the whole story: types, generations, threads, Spark.
"""
from __future__ import annotations

import datetime
import os
from typing import Any, Iterable, Sequence

from ._shmkv import (  # noqa: F401  (re-exported)
    DEFAULT_SEED,
    VECTOR,
    Array,
    BuildError,
    Cache,
    CacheIterator,
    CacheNotFound,
    CorruptImage,
    DuplicateKey,
    Error,
    KeyTooLong,
    NotFound,
    OSFailure,
    StaleCache,
    TypeMismatch,
    Unavailable,
    VersionMismatch,
    attach,
    open,
    part_of,
)
from . import _shmkv

__all__ = [
    "DEFAULT_SEED", "VECTOR", "Array", "Cache", "CacheIterator",
    "Error", "NotFound", "TypeMismatch", "KeyTooLong", "CorruptImage", "VersionMismatch",
    "CacheNotFound", "Unavailable", "StaleCache", "BuildError", "DuplicateKey", "OSFailure",
    "open", "attach", "build", "build_file", "join", "part_of", "get_array",
    "RefreshEvery",
]
__version__ = "0.1.0"





def build(path: str | os.PathLike[str], records: Iterable[Any], *,
          name: str | None = None, seed: int | None = None, created: int | None = None,
          buckets: int | None = None, load_factor: float | None = None,
          dedup: bool | None = None, on_duplicate: str = "error",
          type: str | None = None, lossy_f32: bool = False, threads: int = 0,
          memory_limit: int | None = None, tmpdir: str | None = None,
          part: tuple[int, int] | None = None, filter_part: bool = False,
          format: int | None = None,
          expires: int | datetime.datetime | None = None) -> dict[str, Any]:
    """Builds an image at path from records; returns the build's statistics.

    records: any iterable of (key, value) pairs, (key, value, type) triples,
    (key, value, type, expires) quadruples (type may be None) or dicts
    {"key": ..., "value": ..., "type": ..., "expires": ...} ("type" and
    "expires" optional), as the JSONL records of `shmctl image build`. Keys are str (stored as UTF-8) or
    bytes-like. Without a type, a value's Python type picks it: str -> string,
    bytes-like -> bytes, bool -> bool, int -> i64, float -> f64, a list of str
    -> strlist, of int -> i64list, of numbers with a float -> f64list, a
    float32/float64/int64 array (numpy, array.array) -> f32list/f64list/i64list.
    A type ("f32list", "i64", ...) converts without loss, else raises
    (lossy_f32=True rounds to f32). type= gives one type to every record.

    The options are `shmctl image build`'s: name, seed, created (unix time;
    SOURCE_DATE_EPOCH or now by default), buckets or load_factor, dedup,
    on_duplicate ("error", "first", "last"), threads (0: every CPU),
    memory_limit (bytes; None: half of the available memory, 0: none; above
    it the build spills to tmpdir), part=(k, n) with buckets (a fragment
    for join(); filter_part=True skips other parts' records instead of
    refusing them). The same records and options give the same bytes as
    `shmctl image build`.

    format: the image format version, 1 or 2 (None: the builder's default,
    2). format=1 is for fleets whose readers are older than format 2 (they
    refuse a format 2 image; lib/FORMAT.md §15: upgrade readers first, then
    builders). Only format 2 holds expiry times.

    Expiry (format 2 only, lib/FORMAT.md §17.6): from that second on a
    reader treats the entry as absent. A record's own expiry (the fourth
    item, or the dict's "expires"; None: never) wins over expires=, the
    expiry of every record that gives none. A time is int Unix seconds or
    an aware datetime (a fraction of a second rounds up); a naive datetime,
    a time outside 1970-01-01T00:00:01Z..2106-02-07T06:28:15Z, another type,
    or an expiry with format 1 raise (BuildError naming the record, or
    ValueError for expires=).

    The image is written atomically (a temporary renamed over path). A bad
    record raises BuildError (a ValueError) naming it ("record #8 (index 7)")
    and why, with .index set; DuplicateKey for a repeated key; nothing is left
    at path. The GIL is released while the image is laid out and written.
    """
    opts = dict(name=name, seed=seed, created=created, buckets=buckets,
                load_factor=load_factor, dedup=dedup, on_duplicate=on_duplicate, type=type,
                lossy_f32=lossy_f32, threads=threads, memory_limit=memory_limit,
                tmpdir=tmpdir, part=part, filter_part=filter_part or None, format=format,
                expires=expires)
    return _shmkv._build(path, records, **opts)


def build_file(path: str | os.PathLike[str],
               inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
               format: str | int | tuple[str, int] | None = None,
               **options: Any) -> dict[str, Any]:
    """Builds an image at path from JSONL or TSV files, as `shmctl image build`.

    inputs: one path or a list of them ("-" is standard input). format, as
    `shmctl image build --format`: the input's, "jsonl" or "tsv" (None: TSV
    for names ending in .tsv, else JSONL), or the image format version, 1 or
    2 (None: a JSONL meta line's, else build()'s default), or both as a
    tuple, ("tsv", 2). The options are build()'s, but not expires=:
    records carry their own expiry (format 2), JSONL as "expires" (RFC 3339
    or Unix seconds), TSV as a third column with tsv_expires=True
    (key<TAB>value<TAB>expires, empty: none). type= is the value type of TSV
    input (default string). Errors name the file, the line, the key and
    why. The GIL is released while files are read and the image written.
    """
    fmts = format if isinstance(format, tuple) else (format,)
    inp = [f for f in fmts if f is not None and not isinstance(f, int)]
    ver = [f for f in fmts if isinstance(f, int) and not isinstance(f, bool)]
    if len(inp) > 1 or len(ver) > 1 or len(inp) + len(ver) != len(
            [f for f in fmts if f is not None]):
        raise ValueError(f"format {format!r}: expected 'jsonl' or 'tsv', 1 or 2, or one of "
                         "each as a tuple")
    if ver:
        options["format"] = ver[0]
    return _shmkv._build_file(path, inputs, inp[0] if inp else None, **options)


def join(out: str | os.PathLike[str], fragments: Sequence[str | os.PathLike[str]], *,
         threads: int = 0, memory_limit: int | None = None,
         tmpdir: str | None = None) -> dict[str, Any]:
    """Joins the fragments of a partitioned build (given in part order 1..n)
    into one image at out, byte-identical to a single build of all their
    records, as `shmctl image join`. Every fragment is verified, must agree
    with the first on buckets, seed, created, name, dedup and format version,
    and may hold only keys of its own part; else BuildError/CorruptImage
    naming it. The image has the fragments' format (1 or 2, as built with
    build(format=...)) and keeps their expiry times. The GIL is released
    throughout."""
    return _shmkv._join(out, [os.fspath(f) for f in fragments], threads=threads,
                        memory_limit=memory_limit, tmpdir=tmpdir)


def get_array(cache: Cache, keys: Sequence[Any], dtype: Any = None,
              fill: float | None = None) -> tuple[Any, list[int]]:
    """get_many() into a new 2-D numpy array: (array, missing rows).

    dtype and the row length come from the first key found (f32list ->
    float32, f64list -> float64, i64list -> int64) unless dtype is given;
    absent keys' rows hold fill (NaN, or 0 for int64). Needs numpy."""
    import numpy as np
    first = None
    for v in cache.get_many(keys):
        if v is not None:
            first = v
            break
    if first is None:
        if dtype is None:
            raise NotFound(keys[0] if len(keys) else "")
        return np.full((len(keys), 0), np.nan if fill is None else fill, dtype=dtype), \
            list(range(len(keys)))
    if not isinstance(first, Array):
        raise TypeMismatch(f"get_array: the values are {type(first).__name__}, "
                           "not numeric lists")
    dt = np.dtype(dtype) if dtype is not None else np.dtype(
        {"f": np.float32, "d": np.float64, "q": np.int64}[first.typecode])
    out = np.empty((len(keys), len(first)), dtype=dt)
    missing = cache.get_many(keys, out=out, fill=fill)
    return out, missing


class RefreshEvery:
    """The generations policy for a long-running server: refresh at most every
    `interval` seconds, on a call, never from a background thread.

        policy = shmkv.RefreshEvery(cache, 0.1)
        def handle(request):
            policy.maybe_refresh()           # one clock read; refresh every 100 ms
            return cache[request.key]

    refresh() itself costs one fstat and one atomic load when nothing changed;
    the interval bounds even that. A failed refresh (the loader mid-publish, a
    generation that cannot be mapped; StaleCache: the cache was dropped, attach
    anew) is logged through on_error (default: ignored) and the cache keeps
    serving its generation. Values read before a refresh stay
    valid: their generation stays mapped while they live.
    """

    def __init__(self, cache: Cache, interval: float = 0.1, on_error: Any = None) -> None:
        import time
        self.cache = cache
        self.interval = interval
        self.on_error = on_error
        self._clock = time.monotonic
        self._next = self._clock() + interval

    def maybe_refresh(self) -> bool:
        """Refreshes if interval seconds have passed since the last one; True
        when the cache moved to a new generation."""
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self.interval
        try:
            return self.cache.refresh()
        except Error as e:
            if self.on_error is not None:
                self.on_error(e)
            return False
