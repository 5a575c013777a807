#!/usr/bin/env bash
# tests/model/run.sh BUILD PYTHON [DRIVER_OPTION...] - the writes model test
# (README.md here) with its four readers: the C one (BUILD/tests/model/
# model_reader), the Python one (model_reader.py, run by PYTHON, a Python
# with the shmkv package installed), the Go one (go/internal/modelreader,
# built here with $GO, else go) and the Java one (java/'s ModelReader, a
# test class: mvn test-compile, then run on the test class path with
# $JAVA_HOME's java, a JDK of 22 or later). BUILD has shmctl and the loader.
# The options go to writes_model.py (--publishes N, --seed S, --keep).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
py=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
go=${GO:-go}
jh=${JAVA_HOME:?set JAVA_HOME to a JDK of 22 or later}
for f in "$build/shmctl/shmctl" "$build/loader/shmkv-loader" "$build/tests/model/model_reader"; do
	[ -x "$f" ] || { echo "$0: $f is not built (ninja -C $build)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/shmkv-model-readers.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Go: the module's own go.sum, no cgo (go/README.md)
(cd "$top/go" && CGO_ENABLED=0 GOFLAGS=-mod=readonly "$go" build -o "$work/modelreader" ./internal/modelreader)
# Java: the classes and the test class path (its dependencies' jars from ~/.m2)
JAVA_HOME=$jh mvn -B -q -f "$top/java/pom.xml" test-compile \
	org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath \
	-Dmdep.includeScope=test -Dmdep.outputFile="$work/classpath"
cp="$top/java/target/classes:$top/java/target/test-classes:$(cat "$work/classpath")"

q() { printf '%q ' "$@"; }
"$py" "$here/writes_model.py" --shmctl "$build/shmctl/shmctl" \
	--loader "$build/loader/shmkv-loader" \
	--reader "c=$(q "$build/tests/model/model_reader")" \
	--reader "python=$(q "$py" "$here/model_reader.py")" \
	--reader "go=$(q "$work/modelreader")" \
	--reader "java=$(q "$jh/bin/java" --enable-native-access=ALL-UNNAMED -cp "$cp" org.shmkv.ModelReader)" \
	"$@"
