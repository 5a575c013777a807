#!/bin/sh
# Builds the driver (README.md) into $OUT (default ./compare): this tree's
# go/ reader against a Go map, and against AxonCache's Go binding when
# AXONCACHE names a checkout of it (its Go package compiles AxonCache.cpp
# through cgo, so no CMake build of it is needed; -tags axon). Without
# AXONCACHE, ./axoncache links to an empty module of that name, so that
# go.mod's replace resolves, and the axon system is left out.
set -eu
cd "$(dirname "$0")"
out=${OUT:-compare}
if [ -n "${AXONCACHE:-}" ]; then
	[ -f "$AXONCACHE/axoncache.go" ] || { echo "build.sh: no axoncache.go in $AXONCACHE" >&2; exit 1; }
	ln -sfn "$AXONCACHE" axoncache # go.mod: replace github.com/AppLovin/AxonCache => ./axoncache
	exec go build -tags axon -o "$out" .
fi
stub=${TMPDIR:-/tmp}/shmkv-bench-go-noaxon
mkdir -p "$stub"
printf 'module github.com/AppLovin/AxonCache\n\ngo 1.21\n' > "$stub/go.mod"
ln -sfn "$stub" axoncache
exec go build -o "$out" .
