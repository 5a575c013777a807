#!/bin/sh
# bench/java/build.sh AXON [OUT] - build the Java side of the AxonCache
# comparison (bench/java/README.md) into OUT (default /tmp/shmkv-axon-java),
# outside this tree. AXON is a checkout of AppLovin/AxonCache whose C++
# library is built in AXON/build-release (CMake Release, README.md there).
# Nothing of AxonCache is copied into this tree: its Java classes and JNI
# sources are compiled from AXON into OUT. Never run by CI or the build.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 AXON_CHECKOUT [OUT]" >&2; exit 2; }
AXON=$(cd "$1" && pwd)
OUT=${2:-/tmp/shmkv-axon-java}
J=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
LIB=$AXON/build-release/src/libaxoncache.so
[ -f "$LIB" ] || { echo "$0: $LIB missing: build AxonCache first (CMake Release in $AXON/build-release)" >&2; exit 1; }
[ -f /usr/include/utf8cpp/utf8.h ] || { echo "$0: its JNI code needs utf8cpp (Debian: libutfcpp-dev)" >&2; exit 1; }
mkdir -p "$OUT/classes/natives/linux-x86_64" "$OUT/hdr" "$OUT/driver"
# 1. AxonCache's Java classes (com.applovin.axoncache), with their JNI headers
"$J/bin/javac" -nowarn -d "$OUT/classes" -h "$OUT/hdr" "$AXON"/java/src/main/java/com/applovin/axoncache/*.java
# 2. its JNI library, where its NativeLibraryLoader looks (a class-path resource)
g++ -O2 -std=c++20 -shared -fPIC -o "$OUT/classes/natives/linux-x86_64/libaxoncache_jni.so" \
	"$AXON/java/jni/CacheReaderJNI.cpp" "$AXON/java/jni/CacheWriterJNI.cpp" \
	-I"$AXON/include" -I"$AXON/java/jni" -I"$OUT/hdr" -I/usr/include/utf8cpp \
	-I"$J/include" -I"$J/include/linux" \
	-L"$AXON/build-release/src" -laxoncache -Wl,-rpath,"$AXON/build-release/src"
# 3. this tree's reader and benchmark jar, and our driver against both
JAVA_HOME=$J mvn -B -q -f "$TOP/java/pom.xml" -Pbench package -DskipTests
cp "$TOP/java/target/benchmarks.jar" "$OUT/benchmarks.jar"
"$J/bin/javac" -d "$OUT/driver" -cp "$OUT/classes:$OUT/benchmarks.jar" "$HERE/AxonCompare.java"
echo "built in $OUT: run with"
echo "  $J/bin/java -Xmx8g -XX:+UseParallelGC -cp $OUT/driver:$OUT/classes:$OUT/benchmarks.jar AxonCompare KEYS ROUNDS V2DIR [V1DIR]"
