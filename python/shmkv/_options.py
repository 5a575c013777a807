"""shmkv._options: the build options, defined once.

Each option is one field of the TypedDicts below: its name, its type (what
a type checker checks, through the stubs' ``**options: Unpack[...]``, and
what ``options()`` checks at run time), its default and its doc (the
``Opt`` in the ``Annotated``). Everything else takes them from here:
build(), build_file(), join() and upgrade() (shmkv/__init__.py) check and
complete a call's keywords with ``options()`` before the extension reads
them; the extension's setter table (src/build.c) reads these names, and
tests/test_options.py fails when it and this file differ; the stubs
import these TypedDicts; shmkv.spark and shmkv.dask take FragmentOptions;
the docstrings' option lists are ``describe()``'s.

The options are those of `shmctl image build`/`join` (builder/README.md).
"""
import datetime
import os
import textwrap
import types
import typing
from typing import Annotated, Any, Literal, NamedTuple, TypedDict, Union


class Opt(NamedTuple):
    """An option's default (what leaving it out means) and its doc."""
    default: Any
    doc: str


TypeName = Literal["bytes", "string", "str", "i64", "bool", "f64", "f32list", "f64list",
                   "i64list", "strlist"]
"""A value type's name (lib/FORMAT.md §8; "str" is "string")."""

Expires = Union[int, datetime.datetime, None]
"""An expiry: int Unix seconds or an aware datetime; None: never."""


class JoinOptions(TypedDict, total=False):
    """How a build, a join or an upgrade works (not what it writes)."""
    threads: Annotated[int | None, Opt(
        None, "worker threads, 1..1024; None or 0: every CPU")]
    memory_limit: Annotated[int | None, Opt(
        None, "bytes the build may hold in memory before it spills to tmpdir (at least "
        "1 MiB); None: half of the available memory; 0: no limit")]
    tmpdir: Annotated[str | os.PathLike[str] | None, Opt(
        None, "where a build over memory_limit spills; None: next to the output")]


class FragmentOptions(JoinOptions, total=False):
    """What every fragment of a partitioned build shares (shmkv.spark,
    shmkv.dask): the image's identity and how records become entries."""
    name: Annotated[str | None, Opt(
        None, "the image's name, at most 63 bytes of UTF-8; None: empty")]
    seed: Annotated[int | None, Opt(
        None, "the key hash's seed (u64); None: DEFAULT_SEED")]
    created: Annotated[int | None, Opt(
        None, "the creation time, Unix seconds; None: SOURCE_DATE_EPOCH, else now")]
    dedup: Annotated[bool | None, Opt(
        None, "store identical values once; None: yes")]
    on_duplicate: Annotated[Literal["error", "first", "last"], Opt(
        "error", "a key given twice: 'error' (DuplicateKey naming both records), keep the "
        "'first' or the 'last' record")]
    lossy_f32: Annotated[bool, Opt(
        False, "round a number an f32 cannot hold exactly to the nearest f32 (f32list) "
        "instead of refusing it")]


class LayoutOptions(FragmentOptions, total=False):
    """A whole build's options: the fragment's, and the layout and parts."""
    buckets: Annotated[int | None, Opt(
        None, "the exact bucket count (needed with part); None: from load_factor")]
    load_factor: Annotated[float | None, Opt(
        None, "the share of each bucket the records fill, (0, 1]; None: the builder's")]
    type: Annotated[TypeName | None, Opt(
        None, "the value type of every record (build: none inferred; build_file: TSV "
        "values, default 'string')")]
    part: Annotated[tuple[int, int] | None, Opt(
        None, "(k, n): build part k of n of a partitioned image (lib/FORMAT.md §14; "
        "needs buckets), then join() the n fragments")]
    filter_part: Annotated[bool, Opt(
        False, "with part: skip the records of other parts instead of refusing them")]
    delta_of: Annotated[str | os.PathLike[str] | None, Opt(
        None, "build a delta image of this plain image (lib/FORMAT.md §19): the records "
        "are upserts, removals (shmkv.REMOVE) its tombstones; it takes the base's seed "
        "and hash bits, and its name unless name is given")]
    after: Annotated[str | os.PathLike[str] | None, Opt(
        None, "with delta_of: the delta of the same base this one follows in its chain "
        "(the new delta names it, and takes the next seq)")]


class BuildOptions(LayoutOptions, total=False):
    """build()'s options."""
    expires: Annotated[Expires, Opt(
        None, "the expiry of every record that gives none (lib/FORMAT.md §17.6): int Unix "
        "seconds or an aware datetime; None: never")]


class FileOptions(LayoutOptions, total=False):
    """build_file()'s options."""
    tsv_expires: Annotated[bool, Opt(
        False, "TSV lines are key<TAB>value<TAB>expires (RFC 3339 or Unix seconds; empty: "
        "never)")]
    tsv_removes: Annotated[bool, Opt(
        False, "with delta_of: a TSV line of a key alone (no TAB) removes that key (a "
        "tombstone); else such a line is an error")]


KINDS = (JoinOptions, FragmentOptions, LayoutOptions, BuildOptions, FileOptions)


def spec(kind: type) -> dict[str, tuple[Any, Opt]]:
    """kind's options in declaration order: name -> (type, Opt)."""
    out = {}
    for name, hint in typing.get_type_hints(kind, include_extras=True).items():
        tp, *meta = typing.get_args(hint)
        (opt,) = [m for m in meta if isinstance(m, Opt)]
        out[name] = (tp, opt)
    return out


def _fits(value: Any, tp: Any) -> bool:
    """Whether value is of type tp (the forms the options use)."""
    origin = typing.get_origin(tp)
    if tp is None or tp is type(None):
        return value is None
    if tp is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_fits(value, t) for t in typing.get_args(tp))
    if origin is Literal:
        return any(value == v and type(value) is type(v) for v in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        return isinstance(value, tuple) and len(value) == len(args) and all(
            _fits(v, t) for v, t in zip(value, args))
    if origin is not None:  # os.PathLike[str]
        return isinstance(value, origin)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _name(tp: Any) -> str:
    """tp as the docs and messages write it."""
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "None"
    if origin in (Union, types.UnionType):
        return " | ".join(_name(t) for t in typing.get_args(tp))
    if origin is Literal:
        return " | ".join(repr(v) for v in typing.get_args(tp))
    if origin is tuple:
        return f"tuple[{', '.join(_name(t) for t in typing.get_args(tp))}]"
    if origin is not None:
        return f"{origin.__module__}.{origin.__qualname__}"
    return getattr(tp, "__qualname__", repr(tp))


def options(kind: type, given: dict[str, Any], func: str) -> dict[str, Any]:
    """Every option of kind, from the keywords given to func (the others at
    their defaults), each checked against its type; paths as str. Raises
    TypeError for a keyword kind does not take or a value of another type,
    ValueError for a value outside a Literal's."""
    s = spec(kind)
    for name in given:
        if name not in s:
            hint = ""
            if name == "format":
                hint = (": the builder writes image format 2 only (format 1 is retired; "
                        "shmkv.upgrade converts a format 1 image)")
            elif any(name in spec(k) for k in KINDS):
                hint = f": {func}() takes {', '.join(s)}"
            raise TypeError(f"{func}() got an unexpected keyword argument {name!r}{hint}")
    out = {}
    for name, (tp, opt) in s.items():
        value = given.get(name, opt.default)
        if not _fits(value, tp):
            literal = [t for t in [tp, *typing.get_args(tp)] if typing.get_origin(t) is Literal]
            err = ValueError if literal and isinstance(value, str) else TypeError
            raise err(f"{func}(): {name}={value!r}: expected {_name(tp)}")
        out[name] = os.fspath(value) if isinstance(value, os.PathLike) else value
    return out


def describe(kind: type, indent: str = "    ") -> str:
    """kind's options as a docstring's list: name (type, default) and doc."""
    lines = []
    for name, (tp, opt) in spec(kind).items():
        lines.append(f"{indent}{name}: {_name(tp)} = {opt.default!r}")
        lines += textwrap.wrap(opt.doc, 76, initial_indent=indent + "    ",
                               subsequent_indent=indent + "    ")
    return "\n".join(lines) + "\n"
