#!/bin/sh
# bench/java/build.sh OUT [AXON] - builds the Java comparison (README.md) into
# OUT, outside this tree: this tree's reader (java/, Maven package), and
# Compare.java against it. With AXON, a checkout of AppLovin/AxonCache whose
# C++ library is built in AXON/build-release (CMake Release), also its Java
# classes, its JNI library (AXON/java/jni, utf8cpp from Debian's
# libutfcpp-dev) and AxonSys.java. Nothing of AxonCache is copied into this
# tree. Never run by CI or the build.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OUT [AXON_CHECKOUT]" >&2; exit 2; }
OUT=$1
J=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
rm -rf "$OUT/driver" "$OUT/classes"
mkdir -p "$OUT/driver"
JAVA_HOME=$J mvn -B -q -f "$TOP/java/pom.xml" package -DskipTests
# the library jar, not its -sources and -javadoc jars beside it
for j in "$TOP"/java/target/shmkv-*.jar; do
	case $j in *-sources.jar | *-javadoc.jar) ;; *) cp "$j" "$OUT/shmkv.jar" ;; esac
done
# the reader's runtime dependencies (from ~/.m2), as a class path
JAVA_HOME=$J mvn -B -q -f "$TOP/java/pom.xml" dependency:build-classpath -Dmdep.includeScope=runtime \
	-Dmdep.outputFile="$OUT/deps.classpath"
"$J/bin/javac" -d "$OUT/driver" -cp "$OUT/shmkv.jar" "$HERE/Compare.java"
[ $# -ge 2 ] || exit 0
AXON=$(cd "$2" && pwd)
LIB=$AXON/build-release/src/libaxoncache.so
[ -f "$LIB" ] || { echo "$0: $LIB missing: build AxonCache first (CMake Release in $AXON/build-release)" >&2; exit 1; }
[ -f /usr/include/utf8cpp/utf8.h ] || { echo "$0: its JNI code needs utf8cpp (Debian: libutfcpp-dev)" >&2; exit 1; }
mkdir -p "$OUT/classes/natives/linux-x86_64" "$OUT/hdr"
# AxonCache's Java classes (com.applovin.axoncache), with their JNI headers
"$J/bin/javac" -nowarn -d "$OUT/classes" -h "$OUT/hdr" "$AXON"/java/src/main/java/com/applovin/axoncache/*.java
# its JNI library, where its NativeLibraryLoader looks (a class-path resource)
g++ -O2 -std=c++20 -shared -fPIC -o "$OUT/classes/natives/linux-x86_64/libaxoncache_jni.so" \
	"$AXON/java/jni/CacheReaderJNI.cpp" "$AXON/java/jni/CacheWriterJNI.cpp" \
	-I"$AXON/include" -I"$AXON/java/jni" -I"$OUT/hdr" -I/usr/include/utf8cpp \
	-I"$J/include" -I"$J/include/linux" \
	-L"$AXON/build-release/src" -laxoncache -Wl,-rpath,"$AXON/build-release/src"
"$J/bin/javac" -d "$OUT/driver" -cp "$OUT/driver:$OUT/classes:$OUT/shmkv.jar" "$HERE/AxonSys.java"
