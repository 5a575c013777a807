#!/bin/sh
# wrap_exe.sh OUT WRAPPER PROG - writes OUT, an executable script that runs
# PROG through WRAPPER. A cross build's tests start shmctl and shmkv-loader
# themselves (exec, posix_spawn), which the kernel cannot do for another
# architecture: they start OUT instead, which runs PROG through the cross
# file's exe_wrapper (qemu-aarch64-static), as meson test does for test binaries.
set -eu
printf '#!/bin/sh\nexec '\''%s'\'' '\''%s'\'' "$@"\n' "$2" "$3" >"$1.tmp"
chmod 755 "$1.tmp"
mv "$1.tmp" "$1"
