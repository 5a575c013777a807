"""The package's types as a caller sees them: mypy --strict over a typed
usage file (tests/typing/usage_ok.py: the typed getters' precise types, the
build options of the stubs) passes, and over a file of misuses
(usage_bad.py) reports exactly the errors its "# E:" comments name.
mypy checks the installed package (its stubs and py.typed), from PyPI in
./run's test venv."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "typing")


def mypy(tmp_path, name):
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("SHMKV_REQUIRE_ALL") == "1":
            pytest.fail("mypy is not installed (./run test installs it)")
        pytest.skip("mypy is not installed")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                        "--show-error-codes", "--cache-dir", str(tmp_path / "cache"),
                        os.path.join(HERE, name)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    return r.returncode, r.stdout + r.stderr


def test_typed_usage_passes(tmp_path):
    rc, out = mypy(tmp_path, "usage_ok.py")
    assert rc == 0, out


def test_misuse_is_refused(tmp_path):
    rc, out = mypy(tmp_path, "usage_bad.py")
    with open(os.path.join(HERE, "usage_bad.py"), encoding="utf-8") as f:
        want = {i: line.split("  # E: ")[1].strip()
                for i, line in enumerate(f, 1) if "  # E: " in line}
    got = {}
    for line in out.splitlines():
        m = re.match(r".*usage_bad\.py:(\d+): error: (.*)", line)
        if m:
            got.setdefault(int(m.group(1)), []).append(m.group(2))
    assert rc == 1, out
    assert sorted(got) == sorted(want), out
    for i, part in want.items():
        assert any(part in e for e in got[i]), (i, part, got[i])
