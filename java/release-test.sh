#!/usr/bin/env bash
# release-test.sh [--repo DIR]: the Java reader's release artifacts as a user
# meets them (java/README.md, "Release artifacts"). mvn package makes the jar
# with its sources and javadoc jars; they are installed into a local Maven
# repository (a fresh temporary one, or DIR); java/example is built against
# it with the commands of java/README.md's "A first program", copied from the
# README, and run on an image of lib/examples/users.jsonl; then run once more
# with the jars on a module path. shmctl: $SHMKV_SHMCTL, else build/shmctl/shmctl.
set -euo pipefail
java_dir=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$java_dir")
repo=
while [ $# -gt 0 ]; do
	case $1 in
	--repo) repo=$2; shift 2 ;;
	*) echo "usage: release-test.sh [--repo DIR]" >&2; exit 2 ;;
	esac
done
# java and mvn of $JAVA_HOME (a JDK of 22 or later) first, as the README's commands need
if [ -n "${JAVA_HOME:-}" ]; then export PATH="$JAVA_HOME/bin:$PATH"; fi
shmctl=${SHMKV_SHMCTL:-$top/build/shmctl/shmctl}
[ -x "$shmctl" ] || { echo "release-test.sh: no shmctl at $shmctl (build it, or set SHMKV_SHMCTL)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/shmkv-java-release.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
repo=${repo:-$tmp/repo}
# the local repository for every mvn below, the README's included
export MAVEN_OPTS="${MAVEN_OPTS:-} -Dmaven.repo.local=$repo"
fail() { echo "release-test.sh: $*" >&2; exit 1; }

echo "== the library: package and install into $repo"
mvn -B -ntp -q -f "$java_dir/pom.xml" install -DskipTests
dir=$repo/org/shmkv/shmkv/0.1.0
for j in shmkv-0.1.0.jar shmkv-0.1.0-sources.jar shmkv-0.1.0-javadoc.jar; do
	[ -s "$dir/$j" ] || fail "$j is not in the repository"
done
unzip -l "$dir/shmkv-0.1.0.jar" | grep ' module-info.class$' > /dev/null || fail "the jar has no module-info.class"
unzip -l "$dir/shmkv-0.1.0-sources.jar" | grep ' org/shmkv/Shmkv.java$' > /dev/null || fail "the sources jar lacks Shmkv.java"
unzip -l "$dir/shmkv-0.1.0-javadoc.jar" | grep ' org/shmkv/Shmkv.html$' > /dev/null || fail "the javadoc jar lacks Shmkv.html"

echo "== java/README.md's first program, its commands as written"
# a tree where they run as from the repository's root: the example copied, shmctl and lib/ linked
mkdir -p "$tmp/root/java" "$tmp/root/build/shmctl"
cp -r "$java_dir/example" "$tmp/root/java/example"
rm -rf "$tmp/root/java/example/target" "$tmp/root/java/example/users.shmkv"
ln -s "$shmctl" "$tmp/root/build/shmctl/shmctl"
ln -s "$top/lib" "$tmp/root/lib"
commands=$(awk '/^<!-- first-program-commands -->$/ {on = 1; next} on && /^```sh$/ {in_block = 1; next}
	in_block && /^```$/ {exit} in_block {print}' "$java_dir/README.md")
[ -n "$commands" ] || fail "no commands under <!-- first-program-commands --> in README.md"
(cd "$tmp/root" && bash -euo pipefail -c "$commands") > "$tmp/out" 2> "$tmp/err" \
	|| { cat "$tmp/err" "$tmp/out" >&2; fail "the first program's commands failed"; }
# the program's lines come last, after mvn's (which ends on an ANSI reset, without a newline)
sed 's/\x1b\[[0-9;]*m//g' "$tmp/out" | tail -11 > "$tmp/program"
head -1 "$tmp/program" | grep -x 'Ada Lovelace, 36, -1.5' > /dev/null || { cat "$tmp/out" >&2; fail "unexpected first line"; }
[ "$(grep -c '^user:[12]:[a-z]*: [A-Z0-9]*$' "$tmp/program")" -eq 10 ] || { cat "$tmp/out" >&2; fail "expected 10 entries"; }
if grep -q 'WARNING' "$tmp/err"; then cat "$tmp/err" >&2; fail "a JVM warned"; fi

echo "== the same program, the jars on a module path"
ex=$tmp/root/java/example
(cd "$ex" && java --module-path "$dir/shmkv-0.1.0.jar:$(cat target/classpath.txt | tr ':' '\n' | grep hash4j)" \
	--add-modules org.shmkv --enable-native-access=org.shmkv -cp target/classes FirstRead users.shmkv) \
	> "$tmp/out2" 2> "$tmp/err2" || { cat "$tmp/err2" >&2; fail "the module path run failed"; }
cmp -s "$tmp/program" "$tmp/out2" || fail "the module path run printed otherwise"
if grep -q 'WARNING' "$tmp/err2"; then cat "$tmp/err2" >&2; fail "the JVM warned"; fi
echo "release-test.sh: ok"
