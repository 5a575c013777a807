#!/bin/sh
# Builds ./compare against AxonCache's checkout at $AXONCACHE (a git clone of
# github.com/AppLovin/AxonCache; its Go package compiles AxonCache.cpp through
# cgo, so no CMake build of it is needed) and this tree's go/. README.md.
set -eu
: "${AXONCACHE:?set AXONCACHE to the AxonCache checkout}"
cd "$(dirname "$0")"
[ -f "$AXONCACHE/axoncache.go" ] || { echo "build.sh: no axoncache.go in $AXONCACHE" >&2; exit 1; }
ln -sfn "$AXONCACHE" axoncache # go.mod: replace github.com/AppLovin/AxonCache => ./axoncache
exec go build -o compare .
