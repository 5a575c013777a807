#!/usr/bin/env bash
# deb_test.sh - build the Debian packages from this tree, check
# them with lintian (no errors), install them on this machine, start the
# loader as the unit does (through systemd when it is PID 1, else the unit's
# own ExecStartPre/ExecStart as user shmkv with a NOTIFY_SOCKET, i.e.
# Type=notify), load a cache through the spool with an image made by a
# program linked with `pkg-config --libs shmkv-build`, serve it to a client
# compiled with `pkg-config --cflags shmkv` alone running as a user of group
# shmkv (and refuse a user outside it), then purge and check that nothing is
# left but the user and group shmkv (Debian policy keeps system users).
# Run as root on Debian 12: ./run package. Exit 0 pass, 1 fail.
# SHMKV_DEB_KEEP=DIR keeps the built .deb files in DIR; SHMKV_DEB_FROM=DIR
# tests those instead of building (a quicker rerun).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "deb_test: must run as root (installs packages)" >&2; exit 1; }

fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
step() { echo "== deb_test: $*"; }

PKGS=(shmkv libshmkv-dev libshmkv-build0 shmkv-http)
tmp=$(mktemp -d /var/tmp/shmkv-deb.XXXXXX) # not /tmp: the unit's view must see it
chmod 0755 "$tmp"
notify_pid=
loader_pid=
http_pid=
cleanup() {
	local rc=$?
	[ -n "$http_pid" ] && kill "$http_pid" 2>/dev/null
	[ -n "$loader_pid" ] && kill "$loader_pid" 2>/dev/null
	[ -n "$notify_pid" ] && wait "$notify_pid" 2>/dev/null
	if dpkg-query -W -f='${Status}\n' "${PKGS[@]}" 2>/dev/null |
		grep -q installed; then
		echo "deb_test: purging the packages after a failure"
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${PKGS[@]}" >/dev/null 2>&1 || true
	fi
	userdel shmkvtest-in 2>/dev/null || true
	userdel shmkvtest-out 2>/dev/null || true
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'echo "deb_test: FAIL: line $LINENO: $BASH_COMMAND exited $?" >&2' ERR

for p in "${PKGS[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		fail "$p is installed already: purge it first (this test installs and purges it)"
	fi
done
for f in /etc/shmkv /run/shmkv /var/spool/shmkv; do
	[ -e "$f" ] && fail "$f exists before the install: a leftover (remove it and rerun)"
done
# (/dev/shm/shmkv may exist: loaders of the test suite running as root create
# it; the installed loader then refuses it and uses /dev/shm/shmkv.XXXXXX)

if [ -n "${SHMKV_DEB_FROM:-}" ]; then
	step "1. the packages of an earlier run: $SHMKV_DEB_FROM"
	mkdir -p "$tmp/src"
	cp "$SHMKV_DEB_FROM"/*.deb "$SHMKV_DEB_FROM"/*.changes "$tmp/src/"
else
	step "1. dpkg-buildpackage -b (nocheck: the suite runs in ./run test)"
	pkgsrc=$tmp/src/shmkv-0.1.0
	mkdir -p "$pkgsrc"
	# the files git tracks or would track, as they are in the working tree (a
	# clean clone has the same)
	git -C "$src" ls-files -z --cached --others --exclude-standard |
		(cd "$src" && tar --null -T - -cf -) | tar -C "$pkgsrc" -xf -
	cp -r "$pkgsrc/packaging/debian" "$pkgsrc/debian"
	t0=$SECONDS
	(cd "$pkgsrc" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -b -uc -us \
		>"$tmp/build.log" 2>&1) || { tail -50 "$tmp/build.log"; fail "dpkg-buildpackage failed"; }
	echo "   built in $((SECONDS - t0)) s: $(cd "$tmp/src" && echo *.deb)"
	grep -E 'warning:' "$tmp/build.log" | sort | uniq -c | head -20 || true
	if [ -n "${SHMKV_DEB_KEEP:-}" ]; then
		mkdir -p "$SHMKV_DEB_KEEP"
		cp "$tmp"/src/*.deb "$tmp"/src/*.changes "$SHMKV_DEB_KEEP"/
	fi
fi

step "2. lintian: no errors"
changes=$(echo "$tmp"/src/shmkv_*.changes)
lintian --fail-on error --suppress-tags-from-file /dev/null "$changes" >"$tmp/lintian.log" 2>&1 ||
	{ cat "$tmp/lintian.log"; fail "lintian reports errors"; }
sed 's/^/   /' "$tmp/lintian.log"
grep -q '^E:' "$tmp/lintian.log" && fail "lintian: errors"

step "3. the packages' contents"
deb=$(echo "$tmp"/src/shmkv_*.deb)
dev=$(echo "$tmp"/src/libshmkv-dev_*.deb)
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/shmkv.lst"
dpkg-deb -c "$dev" | awk '{print $6}' >"$tmp/dev.lst"
http=$(echo "$tmp"/src/shmkv-http_*.deb)
dpkg-deb -c "$http" | awk '{print $6}' >"$tmp/http.lst"
for f in ./usr/sbin/shmkv-http ./lib/systemd/system/shmkv-http.service ./lib/systemd/system/shmkv-http.socket \
	./etc/shmkv/http.conf ./usr/share/man/man8/shmkv-http.8.gz; do
	grep -qx "$f" "$tmp/http.lst" || fail "shmkv-http: $f missing"
done
# built with BPF export and NUMA placement (Build-Depends: libbpf-dev, libnuma-dev)
depends=$(dpkg-deb -f "$deb" Depends)
case $depends in *libbpf1*) ;; *) fail "shmkv does not depend on libbpf1 (built without BPF export?): $depends" ;; esac
case $depends in *libnuma1*) ;; *) fail "shmkv does not depend on libnuma1: $depends" ;; esac
for f in ./usr/bin/shmctl ./usr/sbin/shmkv-loader ./lib/systemd/system/shmkv-loader.service \
	./usr/lib/sysusers.d/shmkv.conf ./usr/lib/tmpfiles.d/shmkv.conf ./etc/shmkv/loader.conf \
	./etc/sysctl.d/60-shmkv-hugepages.conf ./usr/share/bash-completion/completions/shmctl \
	./usr/share/man/man8/shmctl.8.gz ./usr/share/man/man8/shmkv-loader.8.gz \
	./usr/share/man/man5/shmkv.conf.5.gz ./usr/share/man/man5/shmkv-format.5.gz \
	./usr/libexec/shmkv-prepare-dirs; do
	grep -qx "$f" "$tmp/shmkv.lst" || fail "shmkv: $f missing"
done
for f in ./usr/include/shmkv.h ./usr/include/shmkv/attach.h ./usr/include/shmkv_build.h \
	./usr/include/shmkv_bpf.h \
	./usr/share/man/man3/shmkv.3.gz; do
	grep -qx "$f" "$tmp/dev.lst" || fail "libshmkv-dev: $f missing"
done
grep -q 'pkgconfig/shmkv.pc$' "$tmp/dev.lst" || fail "libshmkv-dev: shmkv.pc missing"
grep -q 'pkgconfig/shmkv-build.pc$' "$tmp/dev.lst" || fail "libshmkv-dev: shmkv-build.pc missing"

step "4. install"
touch "$tmp/install.stamp" # what shmkv owns after the purge is counted from here
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tmp"/src/shmkv_*.deb "$tmp"/src/libshmkv-dev_*.deb \
	"$tmp"/src/libshmkv-build0_*.deb "$tmp"/src/shmkv-http_*.deb >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "apt-get install failed"; }
getent passwd shmkv >/dev/null || fail "user shmkv not created (sysusers.d)"
getent group shmkv >/dev/null || fail "group shmkv not created (sysusers.d)"
[ "$(stat -c '%U:%G %a' /var/lib/shmkv)" = "shmkv:shmkv 755" ] ||
	fail "/var/lib/shmkv: $(stat -c '%U:%G %a' /var/lib/shmkv), want shmkv:shmkv 755 (tmpfiles.d)"
[ "$(stat -c '%U:%G %a' /var/spool/shmkv)" = "shmkv:shmkv 755" ] ||
	fail "/var/spool/shmkv: $(stat -c '%U:%G %a' /var/spool/shmkv), want shmkv:shmkv 755 (tmpfiles.d)"
unit=/lib/systemd/system/shmkv-loader.service
http_unit=/lib/systemd/system/shmkv-http.service
for u in "$unit" "$http_unit" /lib/systemd/system/shmkv-http.socket; do
	systemd-analyze verify --man=no "$u" || fail "systemd-analyze verify $u"
done
for u in "$unit" "$http_unit"; do
	exposure=$(systemd-analyze security --offline=yes "$u" 2>/dev/null |
		sed -n "s/.*Overall exposure level for $(basename "$u"): \([0-9.]*\).*/\1/p")
	echo "   systemd-analyze security $(basename "$u"): exposure $exposure"
	awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }' ||
		fail "$(basename "$u"): exposure level ${exposure:-unknown}, want <= 2.0 (hardening)"
done
for u in shmkv-http.service shmkv-http.socket; do # installed disabled: serving is a choice
	if [ -d /run/systemd/system ] && systemctl is-enabled -q "$u"; then fail "$u is enabled at install"; fi
done
grep -qx 'Type=notify' "$unit" || fail "$unit: not Type=notify"
[ "$(pkg-config --modversion shmkv)" = 0.1.0 ] || fail "pkg-config shmkv: $(pkg-config --modversion shmkv 2>&1)"
man -w shmctl >/dev/null && man -w 3 shmkv >/dev/null && man -w 5 shmkv.conf >/dev/null ||
	fail "man pages not found by man -w"

step "5. start the loader as the unit does"
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl start shmkv-loader.service || { journalctl -u shmkv-loader -n 50; fail "systemctl start"; }
	systemctl is-active -q shmkv-loader.service || fail "shmkv-loader.service is not active"
	loader_pid=$(systemctl show -p MainPID --value shmkv-loader.service)
	echo "   started by systemd, pid $loader_pid"
else
	echo "   systemd is not PID 1 here: the unit's ExecStartPre (as root) and ExecStart"
	echo "   (as User=shmkv, RuntimeDirectory=shmkv 0750, NOTIFY_SOCKET: Type=notify)"
	pre=$(sed -n 's/^ExecStartPre=+//p' "$unit")
	start=$(sed -n 's/^ExecStart=//p' "$unit")
	[ -n "$start" ] || fail "$unit: no ExecStart"
	$pre
	install -d -m 0750 -o shmkv -g shmkv /run/shmkv
	# shellcheck disable=SC2086 # the unit's command line, split as systemd does
	python3 "$src/packaging/test/notify_run.py" "$tmp/notify.log" \
		setpriv --reuid=shmkv --regid=shmkv --init-groups --inh-caps=-all \
		--no-new-privs $start 2>"$tmp/loader.log" &
	notify_pid=$!
	for _ in $(seq 300); do
		grep -qx 'READY=1' "$tmp/notify.log" 2>/dev/null && break
		grep -q '^EXIT=' "$tmp/notify.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -qx 'READY=1' "$tmp/notify.log" ||
		{ cat "$tmp/loader.log" "$tmp/notify.log"; fail "no READY=1 from the loader"; }
	loader_pid=$(sed -n 's/^PID=//p' "$tmp/notify.log")
	echo "   READY=1 from pid $loader_pid; $(grep -m1 '^STATUS=' "$tmp/notify.log")"
fi
[ "$(stat -c '%U' "/proc/$loader_pid")" = shmkv ] || fail "the loader does not run as user shmkv"
[ "$(stat -c '%a %G' /run/shmkv/control.sock)" = "660 shmkv" ] ||
	fail "control.sock: $(stat -c '%a %G' /run/shmkv/control.sock), want 660 shmkv ([loader] group)"

# a top-level field of a status reply on stdin (nested objects have their own
# generation and segment fields)
status_field() { python3 -c 'import json, sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }

step "6. a cache through the spool, built with pkg-config shmkv-build"
# shellcheck disable=SC2046
cc -o "$tmp/build_client" "$src/packaging/test/build_client.c" \
	$(pkg-config --cflags --libs shmkv-build) || fail "build_client does not link with pkg-config shmkv-build"
"$tmp/build_client" "$tmp/users.shmkv" user:1:name "Ada Lovelace"
install -m 0644 -o shmkv -g shmkv "$tmp/users.shmkv" /var/spool/shmkv/.users.shmkv.tmp
mv /var/spool/shmkv/.users.shmkv.tmp /var/spool/shmkv/users.shmkv # a rename: the protocol
gen=0
for _ in $(seq 300); do
	gen=$(shmctl -j cache status users 2>/dev/null |
		status_field generation || true)
	[ "${gen:-0}" -ge 1 ] && break
	sleep 0.1
done
[ "${gen:-0}" -ge 1 ] || { shmctl cache list; cat "$tmp/loader.log" 2>/dev/null; fail "the spool file was not loaded"; }
[ -e /var/spool/shmkv/users.shmkv ] && fail "the spool file stayed after the load"
seg=$(shmctl -j cache status users | status_field segment)
case $seg in
/dev/shm/shmkv/* | /dev/shm/shmkv.??????/*) ;;
*) fail "segment \"$seg\": want one in /dev/shm/shmkv or its private fallback" ;;
esac
segdir=$(stat -c '%a %U:%G' "$(dirname "$seg")")
[ "$segdir" = "750 shmkv:shmkv" ] || fail "$(dirname "$seg"): $segdir, want 750 shmkv:shmkv"
echo "   loaded gen $gen into $seg"

step "7. a client compiled with pkg-config --cflags shmkv alone"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/client" "$src/packaging/test/client.c" \
	$(pkg-config --cflags shmkv) || fail "the client does not compile with pkg-config --cflags shmkv"
userdel shmkvtest-in 2>/dev/null || true
userdel shmkvtest-out 2>/dev/null || true
useradd --system --no-create-home -G shmkv shmkvtest-in
useradd --system --no-create-home shmkvtest-out
out=$(setpriv --reuid=shmkvtest-in --regid=shmkvtest-in --init-groups "$tmp/client" /run/shmkv users user:1:name) ||
	fail "client in group shmkv: $out"
[ "$out" = "gen=$gen Ada Lovelace" ] || fail "client printed \"$out\", want \"gen=$gen Ada Lovelace\""
echo "   client (group shmkv): $out"
if out=$(setpriv --reuid=shmkvtest-out --regid=shmkvtest-out --init-groups "$tmp/client" \
	/run/shmkv users user:1:name 2>&1); then
	fail "a user outside group shmkv could read the cache: $out"
fi
echo "   client (not in group shmkv): refused: $out"
[ "$(shmctl cache get users answer)" = 42 ] || fail "shmctl cache get users answer"

step "8. metrics: the file the loader keeps for the textfile collector (metrics_file)"
prom=/var/lib/shmkv/shmkv.prom
for _ in $(seq 50); do
	grep -qx "shmkv_cache_generation{cache=\"users\"} $gen" "$prom" 2>/dev/null && break
	sleep 0.1
done
grep -qx "shmkv_cache_generation{cache=\"users\"} $gen" "$prom" ||
	{ cat "$prom"; fail "$prom lacks the users generation"; }
grep -qx 'shmkv_up 1' "$prom" || fail "$prom: no shmkv_up 1"
grep -qx 'shmkv_cache_loads_total{cache="users"} 1' "$prom" || fail "$prom: no loads_total 1"
[ "$(stat -c '%U %a' "$prom")" = "shmkv 644" ] || fail "$prom: $(stat -c '%U %a' "$prom"), want shmkv 644"
[ "$(ls -A /var/lib/shmkv)" = shmkv.prom ] || fail "/var/lib/shmkv: a temporary left: $(ls -A /var/lib/shmkv)"
shmctl cache stats --prometheus | grep -qx "shmkv_cache_generation{cache=\"users\"} $gen" ||
	fail "shmctl cache stats --prometheus"

step "9. bash completion of cache names from the running loader"
# shellcheck disable=SC2016
names=$(bash --norc --noprofile -c 'source /usr/share/bash-completion/bash_completion
	source /usr/share/bash-completion/completions/shmctl
	COMP_WORDS=(shmctl cache status u); COMP_CWORD=3; COMP_LINE="shmctl cache status u"
	COMP_POINT=${#COMP_LINE}; _shmctl; echo "${COMPREPLY[@]}"')
[ "$names" = users ] || fail "completion of 'shmctl cache status u': \"$names\", want users"

step "10. shmkv-http as its unit starts it: the cache over HTTP"
http_get() { # PATH: the body, retried while the server starts (30 s)
	local i
	for i in $(seq 300); do
		curl -sf "http://127.0.0.1:$http_port$1" && return 0
		sleep 0.1
	done
	return 1
}
if [ -d /run/systemd/system ]; then
	systemctl start shmkv-http.service || { journalctl -u shmkv-http -n 50; fail "systemctl start shmkv-http"; }
	http_port=8420
else
	# as the unit's User= (its ExecStart; a free port instead of 8420, written
	# where that user may write)
	start=$(sed -n 's/^ExecStart=//p' "$http_unit")
	[ "$(sed -n 's/^User=//p' "$http_unit")" = shmkv ] || fail "$http_unit: User= is not shmkv"
	install -d -m 0700 -o shmkv -g shmkv "$tmp/http"
	# shellcheck disable=SC2086 # the unit's command line, split as systemd does
	setpriv --reuid=shmkv --regid=shmkv --init-groups --inh-caps=-all --no-new-privs \
		$start --listen 127.0.0.1:0 --port-file "$tmp/http/port" 2>"$tmp/http.log" &
	http_pid=$!
	for _ in $(seq 300); do [ -s "$tmp/http/port" ] && break; sleep 0.1; done
	[ -s "$tmp/http/port" ] || { cat "$tmp/http.log"; fail "shmkv-http did not start"; }
	http_port=$(cat "$tmp/http/port")
	[ "$(stat -c '%U' "/proc/$http_pid")" = shmkv ] || fail "shmkv-http does not run as user shmkv"
fi
got=$(http_get /v1/caches/users/keys/user:1:name) || { cat "$tmp/http.log" 2>/dev/null; fail "GET of users/user:1:name"; }
[ "$got" = "Ada Lovelace" ] || fail "shmkv-http answered \"$got\", want \"Ada Lovelace\""
metrics=$(http_get /metrics) || fail "shmkv-http: GET /metrics"
grep -q "^shmkv_http_" <<<"$metrics" || fail "shmkv-http: /metrics has no shmkv_http_ series"
echo "   GET /v1/caches/users/keys/user:1:name: $got (port $http_port)"
if [ -d /run/systemd/system ]; then
	systemctl stop shmkv-http.service
else
	kill -TERM "$http_pid"
	wait "$http_pid" || fail "shmkv-http exited $? after SIGTERM"
	rm -rf "$tmp/http" # the test's port file, not the package's
fi
http_pid=

step "11. stop (SIGTERM), purge, and check what is left"
if [ -d /run/systemd/system ]; then
	systemctl stop shmkv-loader.service
else
	kill -TERM "$loader_pid"
	wait "$notify_pid" || true
	grep -qx 'STOPPING=1' "$tmp/notify.log" || fail "no STOPPING=1 from the loader"
	grep -qx 'EXIT=0' "$tmp/notify.log" || fail "the loader exited $(grep '^EXIT=' "$tmp/notify.log")"
fi
loader_pid= notify_pid=
grep -qx 'shmkv_up 0' /var/lib/shmkv/shmkv.prom || fail "the metrics file does not say shmkv_up 0 after the stop"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${PKGS[@]}" \
	>"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "apt-get purge failed"; }
left=()
for f in /etc/shmkv /run/shmkv /var/spool/shmkv "$(dirname "$seg")" /usr/bin/shmctl \
	/usr/sbin/shmkv-loader /usr/libexec/shmkv-prepare-dirs /var/lib/shmkv /usr/include/shmkv.h \
	/usr/include/shmkv /usr/include/shmkv_build.h "$unit" /usr/lib/sysusers.d/shmkv.conf \
	/usr/lib/tmpfiles.d/shmkv.conf /etc/sysctl.d/60-shmkv-hugepages.conf \
	/usr/share/bash-completion/completions/shmctl /usr/share/doc/shmkv \
	/usr/share/man/man8/shmctl.8.gz /usr/share/man/man3/shmkv.3.gz /usr/sbin/shmkv-http \
	"$http_unit" /lib/systemd/system/shmkv-http.socket /usr/share/man/man8/shmkv-http.8.gz; do
	[ -e "$f" ] || [ -L "$f" ] && left+=("$f")
done
pkg-config --exists shmkv 2>/dev/null && left+=("shmkv.pc")
# anything the loader's user still owns, on the filesystems it wrote to,
# made since the install (not an older test's leftovers)
uid=$(id -u shmkv)
while IFS= read -r f; do left+=("$f (owned by shmkv)"); done < <(
	find /run /dev/shm /var /etc /tmp -xdev -newer "$tmp/install.stamp" \
		\( -uid "$uid" -o -gid "$(getent group shmkv | cut -d: -f3)" \) \
		-print 2>/dev/null | grep -v '^/proc' || true)
[ ${#left[@]} -eq 0 ] || fail "left after purge: ${left[*]}"
for p in "${PKGS[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 && fail "dpkg still knows $p after the purge"
done
echo "   nothing left but user and group shmkv ($(getent passwd shmkv | cut -d: -f1,3,4))"
echo "deb_test: PASS"
