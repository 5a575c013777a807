#!/bin/bash
# probes_doc.sh - perf/README.md's probe tables name exactly the USDT probes
# that shmkv-loader, libshmkv-build.so and a reader built with SHMKV_USDT=1
# carry (readelf -n), so the documented interface cannot drift from the code.
set -u
readme="$PERF_DIR/README.md"
fail() {
	echo "FAIL: $*"
	exit 1
}
command -v readelf >/dev/null || fail "readelf missing (binutils)"
# documented: table rows that start with | `provider:name` |
doc() { grep -oE "^\| \`$1:[a-z_]+\`" "$readme" | tr -d '|` ' | sort -u; }
# carried: Provider/Name pairs of the .note.stapsdt section
have() {
	readelf -n "$2" | awk -v p="$1" '$1 == "Provider:" { q = $2 } $1 == "Name:" && q == p { print q ":" $2 }' | sort -u
}
status=0
for pair in "shmkv_loader:$SHMKV_LOADER" "shmkv_build:$BUILD_LIB" "shmkv:$USDT_READER"; do
	prov=${pair%%:*}
	file=${pair#*:}
	d=$(doc "$prov")
	h=$(have "$prov" "$file")
	[ -n "$h" ] || fail "$file carries no $prov probes"
	if [ "$d" != "$h" ]; then
		echo "FAIL: $prov: perf/README.md and $(basename "$file") differ (< README, > binary):"
		diff <(echo "$d") <(echo "$h")
		status=1
	else
		echo "ok: $prov: $(echo "$h" | wc -l) probes documented and present"
	fi
done
exit $status
