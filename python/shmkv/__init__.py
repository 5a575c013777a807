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

Delta images (lib/FORMAT.md §19: changes to a base image):

    shmkv.build("d1.shmkv", [("user:42", [0.5]), ("user:7", shmkv.REMOVE)],
                delta_of="features.shmkv")
    shmkv.apply("features.shmkv", ["d1.shmkv"], "new.shmkv")
    shmkv.diff("features.shmkv", "new.shmkv", "d.shmkv")

python/README.md has the whole story: types, generations, threads, Spark.
"""
from __future__ import annotations

import enum
import os
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence, \
    ValuesView
from typing import Any

from ._shmkv import (  # noqa: F401  (re-exported)
    DEFAULT_SEED,
    VECTOR,
    Array,
    BuildError,
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
from ._options import BuildOptions, FileOptions, JoinOptions, describe, options

__all__ = [
    "DEFAULT_SEED", "VECTOR", "Array", "Cache", "CacheIterator",
    "Error", "NotFound", "TypeMismatch", "KeyTooLong", "CorruptImage", "VersionMismatch",
    "CacheNotFound", "Unavailable", "StaleCache", "BuildError", "DuplicateKey", "OSFailure",
    "open", "attach", "build", "build_file", "join", "upgrade", "diff", "apply", "REMOVE",
    "Remove", "part_of", "get_array",
    "RefreshEvery", "BuildOptions", "FileOptions", "JoinOptions",
]
__version__ = "0.1.0"


class _Keys(KeysView):  # type: ignore[type-arg]
    """cache.keys(): a set-like view (len, in, set operations) iterating the
    image's keys in one pass."""
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return self._mapping._keys()  # type: ignore[no-any-return]


class _Values(ValuesView):  # type: ignore[type-arg]
    """cache.values(): a view iterating the values in one pass."""
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return self._mapping._values()  # type: ignore[no-any-return]


class _Items(ItemsView):  # type: ignore[type-arg]
    """cache.items(): a set-like view of (key, value) pairs, read in one
    pass (never a lookup per key: an entry expiring meanwhile cannot make
    it fail half-way)."""
    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return self._mapping._items()  # type: ignore[no-any-return]


class Cache(_shmkv.Cache, Mapping):  # type: ignore[type-arg]
    __doc__ = _shmkv.Cache.__doc__
    __slots__ = ()

    def keys(self) -> _Keys:
        """A view of the keys, in image order: str (UTF-8), or bytes for a
        key that is not UTF-8; expired entries are not in it."""
        return _Keys(self)

    def values(self) -> _Values:
        """A view of the values, in image order."""
        return _Values(self)

    def items(self) -> _Items:
        """A view of the (key, value) pairs, in image order."""
        return _Items(self)


_shmkv._set_cache_class(Cache)


class Remove(enum.Enum):
    """The type of REMOVE, the one removal marker (an enum of one member, so
    that a type checker knows it: ``Literal[Remove.REMOVE]``)."""
    REMOVE = "remove"

    def __repr__(self) -> str:
        return "shmkv.REMOVE"


REMOVE = Remove.REMOVE
"""A record's value that removes its key: ``(key, shmkv.REMOVE)`` in the
records of a delta build (``build(..., delta_of=BASE)``) is a tombstone
(lib/FORMAT.md §19.2), as the dict ``{"key": key, "remove": True}`` and the
JSONL line ``{"key": ..., "remove": true}`` are."""


def build(path: str | os.PathLike[str], records: Iterable[Any],
          **kw: Any) -> dict[str, Any]:
    return _shmkv._build(path, records, REMOVE, **options(BuildOptions, kw, "build"))


build.__doc__ = """Builds an image at path from records; returns the build's statistics.

    records: any iterable of (key, value) pairs, (key, value, type) triples,
    (key, value, type, expires) quadruples (type may be None) or dicts
    {"key": ..., "value": ..., "type": ..., "expires": ...} ("type" and
    "expires" optional), as the JSONL records of `shmctl image build`. Keys
    are str (stored as UTF-8) or bytes-like. Without a type, a value's
    Python type picks it: str -> string, bytes-like -> bytes, bool -> bool,
    int -> i64, float -> f64, a list of str -> strlist, of int -> i64list, of
    numbers with a float -> f64list, a float32/float64/int64 array (numpy,
    array.array) -> f32list/f64list/i64list. A type ("f32list", "i64", ...)
    converts without loss, else raises (lossy_f32=True rounds to f32).

    Expiry (lib/FORMAT.md §17.6): from that second on a reader treats the
    entry as absent. A record's own expiry (the fourth item, or the dict's
    "expires"; None: never) wins over expires=, the expiry of every record
    that gives none. A time is int Unix seconds or an aware datetime (a
    fraction of a second rounds up); a naive datetime or a time outside
    1970-01-01T00:00:01Z..2106-02-07T06:28:15Z raise (BuildError naming the
    record, or ValueError for expires=).

    Delta images (lib/FORMAT.md §19): with delta_of=BASE (a plain image) the
    records are the delta's upserts, and a record (key, shmkv.REMOVE) or
    {"key": key, "remove": True} removes key (a tombstone: no value, type or
    expiry). A key appears once in a delta (a key both set and removed is a
    DuplicateKey). after=PREV makes it the next delta of PREV's chain. A
    removal in a plain build, a base that is a delta, or an after of another
    base raise (BuildError, or Error with errname 'SHMKV_EBASE').

    The same records and options give the same bytes as `shmctl image
    build`. The image is written atomically (a temporary renamed over
    path). A bad record raises BuildError (a ValueError) naming it ("record
    #8 (index 7)") and why, with .index set; DuplicateKey for a repeated key;
    nothing is left at path. The GIL is released while the image is laid out
    and written.

    Options (keywords; a type checker knows them as BuildOptions):
""" + describe(BuildOptions)


def build_file(path: str | os.PathLike[str],
               inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
               format: str | None = None, **kw: Any) -> dict[str, Any]:
    if format is not None and format not in ("jsonl", "tsv"):
        why = (": the image format version is no longer an option (the builder writes "
               "format 2 only)") if isinstance(format, int) else ""
        raise ValueError(f"build_file(): format={format!r}: expected 'jsonl' or 'tsv'{why}")
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return _shmkv._build_file(path, [os.fspath(i) for i in inputs], format,
                              **options(FileOptions, kw, "build_file"))


build_file.__doc__ = """Builds an image at path from JSONL or TSV files, as `shmctl image build`.

    inputs: one path or a list of them ("-" is standard input). format: the
    inputs' format, "jsonl" or "tsv" (None: TSV for names ending in .tsv,
    else JSONL). Records carry their own expiry: JSONL as "expires" (RFC 3339
    or Unix seconds), TSV as a third column with tsv_expires=True. Errors
    name the file, the line, the key and why. The GIL is released while
    files are read and the image written.

    Options (keywords; a type checker knows them as FileOptions):
""" + describe(FileOptions)


def join(out: str | os.PathLike[str], fragments: Sequence[str | os.PathLike[str]],
         **kw: Any) -> dict[str, Any]:
    return _shmkv._join(out, [os.fspath(f) for f in fragments],
                        **options(JoinOptions, kw, "join"))


join.__doc__ = """Joins the fragments of a partitioned build (given in part order 1..n)
    into one image at out, byte-identical to a single build of all their
    records, as `shmctl image join`. Every fragment is verified, must agree
    with the first on buckets, seed, created, name and dedup, and may hold
    only keys of its own part; else BuildError/CorruptImage naming it. The
    image keeps the fragments' expiry times. The GIL is released
    throughout.

    Options (keywords; a type checker knows them as JoinOptions):
""" + describe(JoinOptions)


def upgrade(old: str | os.PathLike[str], new: str | os.PathLike[str],
            **kw: Any) -> dict[str, Any]:
    return _shmkv._upgrade(old, new, **options(JoinOptions, kw, "upgrade"))


upgrade.__doc__ = """Converts the format 1 image old into new: the format 2 image a fresh
    build of its records gives, byte for byte, as `shmctl image upgrade OLD
    -o NEW`; returns the build's statistics. Format 1 is retired (lib/FORMAT.md
    §15): this reader refuses a format 1 image (VersionMismatch), and this is
    the way to convert one. old is verified whole first: a damaged or forged
    one raises CorruptImage naming it, one that is not format 1 (already
    format 2) VersionMismatch saying so; new is written atomically, nothing
    is left under it on an error. The GIL is released throughout.

    Options (keywords; a type checker knows them as JoinOptions):
""" + describe(JoinOptions)


def diff(old: str | os.PathLike[str], new: str | os.PathLike[str],
         out: str | os.PathLike[str], **kw: Any) -> dict[str, Any]:
    return _shmkv._diff(old, new, out, **options(JoinOptions, kw, "diff"))


diff.__doc__ = """Writes to out the delta image (lib/FORMAT.md §19) that turns the plain
    image old into new, as `shmctl image diff OLD NEW -o OUT`: an upsert for
    each key new holds that old does not hold with the same type, value and
    expiry, a tombstone for each key old holds and new does not (expired
    records count: an image's records are what it holds). The delta names
    old as its base and has new's name, created time and dedup flag;
    apply(old, [out], ...) gives new's records. Both are verified whole
    first and must have the same seed and hash bits (BuildError saying to
    rebuild new with old's seed); a damaged one raises CorruptImage naming
    it, a delta given as old or new Error/BuildError. out is written
    atomically; nothing is left under it on an error. Returns the build's
    statistics ("tombstones": the removals). The GIL is released
    throughout.

    Options (keywords; a type checker knows them as JoinOptions):
""" + describe(JoinOptions)


def apply(base: str | os.PathLike[str], deltas: Sequence[str | os.PathLike[str]],
          out: str | os.PathLike[str], as_delta: bool = False,
          **kw: Any) -> dict[str, Any]:
    if isinstance(deltas, (str, bytes, os.PathLike)):
        raise TypeError("apply(): deltas is a sequence of paths (the chain, in order), "
                        f"not one path: [{os.fspath(deltas)!r}]")
    return _shmkv._apply(base, [os.fspath(d) for d in deltas], out, bool(as_delta),
                         **options(JoinOptions, kw, "apply"))


apply.__doc__ = """Applies deltas, a chain of deltas of the plain image base in chain
    order (lib/FORMAT.md §19.5), and writes out, as `shmctl image apply BASE
    DELTA... -o OUT`: the image a fresh build of the merged records gives,
    byte for byte (base's seed, hash bits, name, dedup flag and created
    time), or with as_delta=True one delta of base holding the chain's last
    word on each key (what a loader serves). Every input is verified whole
    first, and the chain must hold together: each a delta of base, the
    first applying to base directly, each next following the one before it;
    else Error (errname 'SHMKV_EBASE') naming both checksums and the seq, or
    CorruptImage naming a damaged file. out is written atomically; nothing
    is left under it on an error. Returns the build's statistics. The GIL is
    released throughout.

    Options (keywords; a type checker knows them as JoinOptions):
""" + describe(JoinOptions)


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
