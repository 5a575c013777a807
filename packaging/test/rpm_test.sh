#!/usr/bin/env bash
# rpm_test.sh - rpmbuild -bb packaging/rpm/shmkv.spec on this
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
http=$(find "$tmp/RPMS" -name "shmkv-http-$version-*.rpm")
[ -n "$http" ] || fail "expected shmkv-http"
rpm -qlp "$http" >"$tmp/http.lst"
for f in /usr/sbin/shmkv-http /usr/lib/systemd/system/shmkv-http.service \
	/usr/lib/systemd/system/shmkv-http.socket /etc/shmkv/http.conf; do
	grep -qx "$f" "$tmp/http.lst" || fail "shmkv-http.rpm: $f missing"
done
grep -qE "^/usr/share/man/man8/shmkv-http.8(\.gz)?$" "$tmp/http.lst" || fail "shmkv-http.rpm: man page missing"
rpm -qlp "$devel" >"$tmp/devel.lst"
rpm -qlp "$libs" >"$tmp/libs.lst"
grep -qx /usr/include/shmkv.h "$tmp/devel.lst" || fail "shmkv-devel.rpm: shmkv.h missing"
grep -qx /usr/include/shmkv_bpf.h "$tmp/devel.lst" || fail "shmkv-devel.rpm: shmkv_bpf.h missing"
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
# the loader is built with BPF export and NUMA placement
grep -q 'libbpf.so' "$tmp/requires.txt" || fail "shmkv does not require libbpf (built without BPF export?)"
grep -q 'libnuma.so' "$tmp/requires.txt" || fail "shmkv does not require libnuma"
unit=$(find "$tmp/BUILDROOT" -path '*/usr/lib/systemd/system/shmkv-loader.service')
grep -qx 'ExecStart=/usr/sbin/shmkv-loader --config /etc/shmkv/loader.conf --foreground' "$unit" ||
	fail "the unit's ExecStart is not the installed paths: $(grep ExecStart= "$unit")"

# Install the three RPMs into a scratch root with rpm itself (its own
# database there; --nodeps: the Debian host's libraries are not in it;
# --noscripts: systemd, sysusers and tmpfiles are not in that root), run
# what they installed against the host's libraries, and erase them again:
# rpm must know every file it laid down and leave nothing behind.
root=$tmp/root
mkdir -p "$root"
# its database in the root (Debian's rpm keeps it in ~/.rpmdb by default)
rpmr=(rpm --root "$root" --dbpath /var/lib/rpm)
"${rpmr[@]}" --initdb
"${rpmr[@]}" -i --nodeps --noscripts "$main" "$libs" "$devel" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "rpm -i into $root failed"; }
[ "$("${rpmr[@]}" -qa | sort | sed 's/-[0-9].*//' | tr '\n' ' ')" = "shmkv shmkv-devel shmkv-libs " ] ||
	fail "rpm -qa in $root: $("${rpmr[@]}" -qa | tr '\n' ' ')"
"${rpmr[@]}" -V --nodeps --noscripts shmkv shmkv-libs shmkv-devel || fail "rpm -V: installed files differ from the packages"
libdir=$(dirname "$(find "$root/usr" -name 'libshmkv-build.so.0' | head -1)")
ver=$(LD_LIBRARY_PATH=$libdir "$root/usr/bin/shmctl" --version) || fail "the installed shmctl does not run"
case $ver in *"$version"*) ;; *) fail "installed shmctl --version: $ver" ;; esac
LD_LIBRARY_PATH=$libdir "$root/usr/sbin/shmkv-loader" --help >/dev/null 2>&1 ||
	fail "the installed shmkv-loader does not run"
# a client compiled with the installed pkg-config file alone
# (its prefix moved to the scratch root; libxxhash comes from the host)
PKG_CONFIG_PATH=$(dirname "$(find "$root" -name shmkv.pc | head -1)") \
	pkg-config --define-variable=prefix="$root/usr" --cflags shmkv >"$tmp/cflags" ||
	fail "pkg-config shmkv from the RPM"
grep -q -- "-I$root/usr/include" "$tmp/cflags" || fail "pkg-config shmkv: $(cat "$tmp/cflags")"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/client" "$src/packaging/test/client.c" $(cat "$tmp/cflags") ||
	fail "the client does not compile with the RPM's pkg-config --cflags shmkv ($(cat "$tmp/cflags"))"
"${rpmr[@]}" -e --nodeps --noscripts shmkv shmkv-devel shmkv-libs || fail "rpm -e failed"
left=$(find "$root" -mindepth 1 -not -path "$root/var*" -not -type d | head -20)
[ -z "$left" ] || fail "left in $root after rpm -e: $left"
echo "rpm_test: installed into a scratch root, ran, compiled a client, erased"
echo "rpm_test: PASS"
