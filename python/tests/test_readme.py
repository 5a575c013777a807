"""The READMEs' first reads (python/README.md "First read", README.md "Read
it from Python") work pasted as written: each runs in a scratch directory
under this interpreter (the installed package) and prints what its
comments say (tests/first_read.py)."""
import pytest

import first_read


@pytest.mark.parametrize("readme,heading,files", first_read.READS,
                         ids=[r for r, _, _ in first_read.READS])
def test_first_read_runs_as_written(tmp_path, readme, heading, files):
    assert first_read.expected(first_read.snippet(readme, heading))  # it checks something
    why = first_read.run(readme, heading, files, __import__("sys").executable,
                         str(tmp_path / "scratch"))
    assert why is None, why
