#!/usr/bin/env bash
# rpm_test.sh - issue 13 §2: rpmbuild -bb packaging/rpm/shmkv.spec on this
# Debian machine, from a tarball of the tracked files, and check the RPMs'
# contents and scriptlets. --nodeps: the rpm database of a Debian host knows
# none of the (Debian-installed) build dependencies; debuginfo is off since
# Debian's rpm has no find-debuginfo. Exit 0 pass, 1 fail.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "rpm_test: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$(sed -n "s/^Version: *//p" "$src/packaging/rpm/shmkv.spec")
mkdir -p "$tmp/SOURCES" "$tmp/src/shmkv-$version"
git -C "$src" ls-files -z --cached --others --exclude-standard | (cd "$src" && tar --null -T - -cf -) | tar -C "$tmp/src/shmkv-$version" -xf -
tar -C "$tmp/src" -czf "$tmp/SOURCES/shmkv-$version.tar.gz" "shmkv-$version"
t0=$SECONDS
rpmbuild -bb --nodeps --noclean --define "_topdir $tmp" --define 'debug_package %{nil}' \
	--define '_smp_mflags -j2' "$src/packaging/rpm/shmkv.spec" >"$tmp/build.log" 2>&1 ||
	{ tail -40 "$tmp/build.log"; fail "rpmbuild -bb failed"; }
echo "rpm_test: built in $((SECONDS - t0)) s:"
find "$tmp/RPMS" -name '*.rpm' -printf '   %f\n'
main=$(find "$tmp/RPMS" -name "shmkv-$version-*.rpm")
libs=$(find "$tmp/RPMS" -name "shmkv-libs-$version-*.rpm")
devel=$(find "$tmp/RPMS" -name "shmkv-devel-$version-*.rpm")
[ -n "$main" ] && [ -n "$libs" ] && [ -n "$devel" ] || fail "expected shmkv, shmkv-libs, shmkv-devel"
rpm -qlp "$main" >"$tmp/main.lst"
for f in /usr/bin/shmctl /usr/sbin/shmkv-loader /usr/lib/systemd/system/shmkv-loader.service \
	/usr/lib/sysusers.d/shmkv.conf /usr/lib/tmpfiles.d/shmkv.conf /etc/shmkv/loader.conf \
	/usr/libexec/shmkv-prepare-dirs /usr/share/bash-completion/completions/shmctl; do
	grep -qx "$f" "$tmp/main.lst" || fail "shmkv.rpm: $f missing"
done
# man pages: gzipped by Fedora's brp-compress, not by Debian's rpm
for m in man8/shmctl.8 man8/shmkv-loader.8 man5/shmkv.conf.5 man5/shmkv-format.5; do
	grep -qE "^/usr/share/man/$m(\.gz)?$" "$tmp/main.lst" || fail "shmkv.rpm: $m missing"
done
rpm -qlp "$devel" >"$tmp/devel.lst"
rpm -qlp "$libs" >"$tmp/libs.lst"
grep -qx /usr/include/shmkv.h "$tmp/devel.lst" || fail "shmkv-devel.rpm: shmkv.h missing"
grep -q 'pkgconfig/shmkv.pc$' "$tmp/devel.lst" || fail "shmkv-devel.rpm: shmkv.pc missing"
grep -q 'pkgconfig/shmkv-build.pc$' "$tmp/devel.lst" || fail "shmkv-devel.rpm: shmkv-build.pc missing"
grep -qE '^/usr/share/man/man3/shmkv\.3(\.gz)?$' "$tmp/devel.lst" || fail "shmkv-devel.rpm: shmkv.3 missing"
grep -q 'libshmkv-build.so.0$' "$tmp/libs.lst" || fail "shmkv-libs.rpm: the library is missing"
rpm -qp --configfiles "$main" >"$tmp/conf.lst"
grep -qx /etc/shmkv/loader.conf "$tmp/conf.lst" || fail "loader.conf is not %config"
rpm -qp --scripts "$main" >"$tmp/scripts.txt"
grep -q 'shmkv-loader.service' "$tmp/scripts.txt" || fail "no systemd scriptlets"
rpm -qpR "$main" >"$tmp/requires.txt"
grep -q 'libshmkv-build.so.0' "$tmp/requires.txt" || fail "shmkv does not require libshmkv-build.so.0"
unit=$(find "$tmp/BUILDROOT" -path '*/usr/lib/systemd/system/shmkv-loader.service')
grep -qx 'ExecStart=/usr/sbin/shmkv-loader --config /etc/shmkv/loader.conf --foreground' "$unit" ||
	fail "the unit's ExecStart is not the installed paths: $(grep ExecStart= "$unit")"
echo "rpm_test: PASS"
