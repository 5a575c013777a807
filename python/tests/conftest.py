"""Shared fixtures of the shmkv Python tests (python/README.md, "Tests").

They run against the installed package (./run test installs the wheel into a
fresh venv). Programs of the C build come from the environment, set by ./run:
SHMKV_SHMCTL (shmctl), SHMKV_LOADER (shmkv-loader), SHMKV_FUZZ_CORPUS (the
generated image seeds, BUILD/tests/fuzz/corpus/image). A test that needs one
skips with the reason when it is not set, unless SHMKV_REQUIRE_ALL=1 (CI),
where it fails."""
import os
import pytest

TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def program(var):
    """The path in $var, else a skip (a failure under SHMKV_REQUIRE_ALL=1)."""
    p = os.environ.get(var)
    if p and os.access(p, os.X_OK):
        return p
    why = f"${var} names no program (./run test sets it)"
    if os.environ.get("SHMKV_REQUIRE_ALL") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def shmctl():
    return program("SHMKV_SHMCTL")


@pytest.fixture
def loader():
    return program("SHMKV_LOADER")


SAMPLE = [
    ("s", "héllo"), ("b", b"\x00\xffbytes"), ("i", -42), ("f", 2.5), ("t", True),
    ("F", [0.5, 1.25, -2.0]), ("D", [1.5, 2.0, 3.25]), ("I", [1, -2, 3]),
    ("S", ["a", "", "ü"]), ("empty_s", ""),
]
SAMPLE_TYPES = {"F": "f32list"}


def sample_records():
    return [(k, v, SAMPLE_TYPES[k]) if k in SAMPLE_TYPES else (k, v) for k, v in SAMPLE]
