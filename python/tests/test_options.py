"""The build options are defined once, in shmkv/_options.py: the
extension's setter table (src/options.c), the wrappers, the stubs and the
Spark and Dask recipes all take them from there; these tests fail when a
copy drifts."""
import ast
import inspect
import os

import pytest
import shmkv
import shmkv.dask
import shmkv.spark
from shmkv import _options

from conftest import TREE

PKG = os.path.dirname(shmkv.__file__)


def every_option():
    return list(_options.spec(_options.BuildOptions)) + [
        n for n in _options.spec(_options.FileOptions)
        if n not in _options.spec(_options.BuildOptions)]


def test_extension_reads_every_option():
    """The C setters are the definition's options, no more, no fewer."""
    assert sorted(shmkv._shmkv._BUILD_OPTIONS) == sorted(every_option())


def test_each_option_has_a_type_default_and_doc():
    for kind in _options.KINDS:
        for name, (tp, opt) in _options.spec(kind).items():
            assert opt.doc and tp is not None, name
            assert _options._fits(opt.default, tp), (name, opt.default)


@pytest.mark.parametrize("func,kind", [
    (shmkv.build, _options.BuildOptions), (shmkv.build_file, _options.FileOptions),
    (shmkv.join, _options.JoinOptions), (shmkv.upgrade, _options.JoinOptions)])
def test_wrappers_take_their_kind(tmp_path, func, kind):
    """Each wrapper's docstring lists its options (describe()); a keyword
    of another kind is refused, naming the ones it takes."""
    assert _options.describe(kind) in func.__doc__
    others = [n for n in every_option() if n not in _options.spec(kind)]
    assert others  # each kind leaves some out
    for name in others:
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
            func(tmp_path / "x.shmkv", [], **{name: None})
    assert os.listdir(tmp_path) == []


def test_format_option_is_gone(tmp_path):
    """format= (the image format version) is no option: the builder writes
    format 2 only; the error says so."""
    for f in (1, 2):
        with pytest.raises(TypeError, match="format 2 only"):
            shmkv.build(tmp_path / "x.shmkv", [("a", 1)], format=f)
        with pytest.raises(ValueError, match="format 2 only"):
            shmkv.build_file(tmp_path / "x.shmkv", "-", format=f)
        with pytest.raises(TypeError, match="format 2 only"):
            shmkv.spark.build_dataframe([], str(tmp_path / "x.shmkv"), parts=1, buckets=1,
                                        workdir=str(tmp_path / "w"), format=f)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name,value,err,what", [
    ("threads", "4", TypeError, "threads='4': expected int | None"),
    ("threads", True, TypeError, "threads=True"),
    ("threads", 5000, ValueError, "threads=5000"),
    ("memory_limit", 1000, ValueError, "at least 1 MiB"),
    ("seed", -1, ValueError, "seed=-1"),
    ("buckets", 0, ValueError, "buckets=0"),
    ("load_factor", 1.5, ValueError, "load_factor=1.5"),
    ("load_factor", "0.5", TypeError, "load_factor='0.5'"),
    ("on_duplicate", "keep", ValueError, "'error' | 'first' | 'last'"),
    ("type", "float", ValueError, "type='float'"),
    ("name", "x" * 64, ValueError, "at most 63 bytes"),
    ("part", (0, 2), ValueError, "1 <= k <= n"),
    ("part", [1, 2], TypeError, "tuple[int, int]"),
    ("tmpdir", 5, TypeError, "tmpdir=5"),
    ("lossy_f32", 1, TypeError, "lossy_f32=1: expected bool"),
])
def test_bad_values_name_the_option(tmp_path, name, value, err, what):
    with pytest.raises(err) as e:
        shmkv.build(tmp_path / "x.shmkv", [("a", 1)], **{"buckets": 8, name: value})
    assert what in str(e.value)
    assert os.listdir(tmp_path) == []


def test_paths_and_defaults(tmp_path):
    """Options take what their types say (a PathLike tmpdir, a float
    load_factor given as int 1) and leave the others at their defaults."""
    st = shmkv.build(tmp_path / "x.shmkv", [("a", 1)], tmpdir=tmp_path, load_factor=1,
                     created=5)
    assert st["entries"] == 1
    got = _options.options(_options.JoinOptions, {"tmpdir": tmp_path}, "join")
    assert got == {"threads": None, "memory_limit": None, "tmpdir": str(tmp_path)}


def stub_functions():
    with open(os.path.join(PKG, "__init__.pyi"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("name,kind", [
    ("build", "BuildOptions"), ("build_file", "FileOptions"), ("join", "JoinOptions"),
    ("upgrade", "JoinOptions")])
def test_stubs_match_the_wrappers(name, kind):
    """The stub of each wrapper has its parameters, and takes its options as
    **kw: Unpack[the TypedDict the wrapper checks]."""
    stub = stub_functions()[name]
    sig = inspect.signature(getattr(shmkv, name))
    params = [p.name for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
    assert [a.arg for a in stub.args.args + stub.args.kwonlyargs] == params
    assert ast.unparse(stub.args.kwarg.annotation) == f"Unpack[{kind}]"
    src = inspect.getsource(getattr(shmkv, name))
    assert f"options({kind}, kw," in src


@pytest.mark.parametrize("mod", [shmkv.spark, shmkv.dask])
def test_recipes_take_fragment_options(mod):
    """shmkv.spark and shmkv.dask take the options every fragment shares as
    FragmentOptions (no stub of their own: the module is typed)."""
    assert not os.path.exists(mod.__file__[:-3] + ".pyi")
    sig = inspect.signature(mod.build_dataframe)
    assert "Unpack[FragmentOptions]" in str(sig.parameters["kw"].annotation)
    assert _options.describe(_options.FragmentOptions) in mod.build_dataframe.__doc__
    # their own parameters: buckets (every fragment's), type and expires (columns)
    names = set(sig.parameters) - {"kw", "buckets", "type", "expires"}
    assert not names & set(every_option())


def test_readme_lists_the_options():
    """python/README.md's option table names every option, once."""
    with open(os.path.join(TREE, "python", "README.md"), encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("<!-- options -->"):text.index("<!-- /options -->")]
    rows = [line.split("|")[1].strip().strip("`") for line in table.splitlines()
            if line.startswith("| `")]
    assert sorted(rows) == sorted(every_option())
