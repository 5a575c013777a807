"""The READMEs' first reads, run as written (tests/test_readme.py, and
python/release-test.sh against a released wheel).

A first read is the first ```python block of a README section: the top-level
README.md's "Read it from Python" (run from a copy of the repository's top:
it reads lib/examples/users.jsonl) and python/README.md's "First read" (run
from an empty directory). It runs as a script under the interpreter given,
from a scratch directory; every line it prints is checked against the
comment of its print() call ("print(x)  # what it prints").

    python first_read.py PYTHON SCRATCH   runs both, with PYTHON; exit 1 on
                                          a difference, saying which
"""
import os
import re
import shutil
import subprocess
import sys

TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (README, section heading, files of the tree the snippet reads)
READS = [
    ("README.md", "## Read it from Python", ["lib/examples/users.jsonl"]),
    ("python/README.md", "## First read", []),
]


def snippet(readme, heading):
    """The first ```python block after heading in readme (a path in the tree)."""
    with open(os.path.join(TREE, readme), encoding="utf-8") as f:
        text = f.read()
    at = text.index("\n" + heading + "\n")
    section = text[at:text.find("\n## ", at + 1)]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    if not m:
        raise ValueError(f"{readme}: no ```python block under {heading!r}")
    return m.group(1)


def expected(code):
    """What the snippet's print() calls print: their comments, in order."""
    out = []
    for line in code.splitlines():
        if re.match(r"\s*print\(", line):
            if "  # " not in line:
                raise ValueError(f"a print() without its output as a comment: {line.strip()}")
            out.append(line.rsplit("  # ", 1)[1].strip())
    return out


def run(readme, heading, files, python, scratch):
    """Runs one first read in scratch (made empty, with files copied in);
    returns None, or why it failed."""
    code = snippet(readme, heading)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    for f in files:
        os.makedirs(os.path.join(scratch, os.path.dirname(f)), exist_ok=True)
        shutil.copy(os.path.join(TREE, f), os.path.join(scratch, f))
    r = subprocess.run([python, "-c", code], cwd=scratch, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        return f"{readme} ({heading}): exit {r.returncode}:\n{r.stderr}"
    got, want = [line.strip() for line in r.stdout.splitlines()], expected(code)
    if got != want:
        return f"{readme} ({heading}): printed {got}, its comments say {want}"
    if r.stderr:
        return f"{readme} ({heading}): wrote to stderr:\n{r.stderr}"
    return None


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for i, (readme, heading, files) in enumerate(READS):
        why = run(readme, heading, files, argv[1], os.path.join(argv[2], f"read{i}"))
        print(f"first read of {readme}: {'ok' if why is None else 'FAILED'}")
        if why:
            print(why, file=sys.stderr)
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
