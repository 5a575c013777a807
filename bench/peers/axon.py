"""AxonCache (github.com/AppLovin/AxonCache), the peer of every reader: fetched
at a pinned commit into a cache directory at bench time and built there,
never copied into this tree. Offline, or when any step fails, it is left out
and the run says why."""
import os
import subprocess
import sys

URL = os.environ.get("SHMKV_AXONCACHE_URL", "https://github.com/AppLovin/AxonCache.git")
COMMIT = "b6ea10c36f286e3d8a6d759f7e25126b5b84e1a2"  # the commit every figure names


def cache_root() -> str:
    base = os.environ.get("SHMKV_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shmkv-bench")
    return os.path.join(base, f"axoncache-{COMMIT[:12]}")


def _run(cmd, log, **kw):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True, **kw)


class Axon:
    """What is built: .src (checkout), .lib (C++ library dir), .java (its Java
    classes and JNI library, built by bench/java/build.sh), .python (True once
    its module is in the venv). .why says why it is missing."""

    def __init__(self):
        self.root = cache_root()
        self.src = os.path.join(self.root, "src")
        self.lib = os.path.join(self.src, "build-release", "src")
        self.log = os.path.join(self.root, "build.log")
        self.why = None

    def fetch_and_build(self) -> bool:
        os.makedirs(self.root, exist_ok=True)
        try:
            if not os.path.exists(os.path.join(self.src, ".git")):
                print(f"peers: AxonCache: cloning {URL} at {COMMIT[:12]} into {self.src}",
                      file=sys.stderr)
                tmp = self.src + ".part"
                subprocess.run(["rm", "-rf", tmp], check=True)
                _run(["git", "clone", "-q", "--no-checkout", URL, tmp], self.log,
                     timeout=600, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
                _run(["git", "-C", tmp, "checkout", "-q", COMMIT], self.log)
                os.rename(tmp, self.src)
            if not os.path.exists(os.path.join(self.lib, "libaxoncache.so")):
                # its CMake fetches CPM.cmake, whose packages are optional tools
                # (ccache, sanitizer scripts): a stub stands in for it
                stub = os.path.join(self.root, "cpmstub", "cpm")
                os.makedirs(stub, exist_ok=True)
                with open(os.path.join(stub, "CPM_0.36.0.cmake"), "w") as f:
                    f.write("function(CPMAddPackage)\nendfunction()\n")
                print("peers: AxonCache: building its C++ library (CMake Release)", file=sys.stderr)
                _run(["cmake", "-S", self.src, "-B", os.path.join(self.src, "build-release"),
                      "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DAL_WITH_MAIN=OFF",
                      "-DAL_WITH_TESTS=OFF", "-DUSE_CCACHE_BY_DEFAULT=OFF",
                      "-DCPM_SOURCE_CACHE=" + os.path.dirname(stub)], self.log)
                _run(["ninja", "-C", os.path.join(self.src, "build-release")], self.log)
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            step = " ".join(e.cmd[:2]) if hasattr(e, "cmd") else str(e)
            what = (f"cannot clone {URL} (offline?)" if not os.path.exists(self.src)
                    else f"its build failed at `{step}`")
            self.why = f"AxonCache: {what}: its rows are left out (log: {self.log})"
            print("peers: " + self.why, file=sys.stderr)
            return False
        return True

    def install_python(self, venv_python: str) -> bool:
        """Its pybind11 module into the venv (pybind11 and setuptools from the
        system site: Debian's python3-pybind11)."""
        try:
            r = subprocess.run([venv_python, "-c", "import axoncache"], capture_output=True)
            if r.returncode:
                print("peers: AxonCache: building its Python module", file=sys.stderr)
                _run([venv_python, "-m", "pip", "install", "-q", "--no-build-isolation",
                      "--no-deps", self.src], self.log)
            return True
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"peers: AxonCache's Python module: {e} (see {self.log}); its Python rows "
                  "are skipped", file=sys.stderr)
            return False
