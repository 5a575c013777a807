#!/bin/sh
# meson dist script: the sdist gets copies of ../lib and ../builder in place
# of the links, so that it builds on its own.
set -eu
for d in lib builder; do
	rm -f "$MESON_DIST_ROOT/$d"
	cp -RL "$MESON_PROJECT_SOURCE_ROOT/$d" "$MESON_DIST_ROOT/$d"
done
