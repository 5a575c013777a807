#!/usr/bin/env python3
"""bench/peers - every reader of this repository against its peers, one page
(bench/README.md, "Compare"). `./run bench compare [options]` installs what is
missing and runs this; by hand: python3 bench/peers/main.py --build DIR.

For each table size (key_N -> val_N, N < keys) and each kind of pages
(4 KiB: an image on /dev/shm; huge: the image served by shmkv-loader from
2 MiB hugetlb pages, read through attach), it runs C (lookup_bench: shmkv,
its batch, absl, std::unordered_map, LMDB, tinycdb, AxonCache; the lone
gets), the machine's floor (mem_probe over the image's size), Python, Go and
Java (each against its own map and AxonCache's binding), and with --scale
the 4-process figure at --scale-keys (100M) from the loader's hugetlb pages
beside one process holding the same data in absl. It writes results.md,
results.json and results.png into --out, with every driver's raw output
under raw/."""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import axon as axon_mod  # noqa: E402
import drivers  # noqa: E402
import machine  # noqa: E402
import report  # noqa: E402
from drivers import note  # noqa: E402
from loader import HugeLoader  # noqa: E402

TOP = os.path.dirname(os.path.dirname(HERE))
LANGS = ("c", "floor", "python", "go", "java")
BIG_DIR = "/var/tmp/shmkv-peers"  # images above 10M keys: on disk


def count(s: str) -> int:
    m = {"k": 1000, "K": 1000, "M": 1000000, "G": 1000000000}
    return int(float(s[:-1]) * m[s[-1]]) if s and s[-1] in m else int(s)


def parse(argv):
    ap = argparse.ArgumentParser(prog="./run bench compare", description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build-release"),
                    help="the release build dir (./run bench sets it up)")
    ap.add_argument("--out", default=None, help="results dir (default BUILD/bench/compare)")
    ap.add_argument("--keys", type=count, action="append",
                    help="table sizes, repeatable (default 1M and 10M)")
    ap.add_argument("--large", action="store_true", help="also 50M keys (C and the floor)")
    ap.add_argument("--quick", action="store_true",
                    help="100k keys, 3 rounds of 200k lookups, the scale step at 200k: seconds, "
                         "to see that everything runs")
    ap.add_argument("--langs", default=",".join(LANGS), help="which of " + ",".join(LANGS))
    ap.add_argument("--pages", default="4k,huge", help="4k, huge or both")
    ap.add_argument("--rounds", type=int, default=5, help="rounds a process, interleaved")
    ap.add_argument("--lookups", type=count, default=2_000_000, help="lookups a system and round")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every process this many times (rounds pooled, medians)")
    ap.add_argument("--scale", action="store_true",
                    help="the reader-processes step: --procs processes on the loader's cache of "
                         "--scale-keys keys, beside one absl process")
    ap.add_argument("--scale-keys", type=count, default=100_000_000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--no-axoncache", action="store_true", help="leave AxonCache out")
    ap.add_argument("--dir", default="/dev/shm/shmkv-peers", help="where the images go (tmpfs)")
    ap.add_argument("--keep-images", action="store_true",
                    help="keep the images and AxonCache's caches for the next run (they hold memory: "
                         "by default they are removed at the end)")
    a = ap.parse_args(argv)
    if a.quick:
        a.keys, a.rounds, a.lookups, a.scale, a.scale_keys = [100_000], 3, 200_000, True, 200_000
    a.keys = a.keys or [1_000_000, 10_000_000]
    a.langs = [x for x in a.langs.split(",") if x]
    a.pages = [x for x in a.pages.split(",") if x]
    bad = [x for x in a.langs if x not in LANGS] + [p for p in a.pages if p not in ("4k", "huge")]
    if bad:
        ap.error(f"unknown: {', '.join(bad)}")
    return a


class Ctx:
    pass


def sh(cmd, **kw):
    note("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def tree_hash(*paths) -> str:
    """What the venv's shmkv was built from: the index and the work tree's changes."""
    h = hashlib.sha256()
    for args in (["ls-files", "-s", *paths], ["diff", "HEAD", "--", *paths]):
        h.update(subprocess.run(["git", "-C", TOP, *args], capture_output=True).stdout)
    return h.hexdigest()


def setup(a) -> Ctx:
    c = Ctx()
    c.top, c.rounds, c.lookups, c.image_dir = TOP, a.rounds, a.lookups, a.dir
    c.lone_lookups = min(1_000_000, a.lookups)
    c.build = os.path.abspath(a.build)
    c.work = os.path.join(c.build, "bench", "peers")
    os.makedirs(c.work, exist_ok=True)
    c.axon = axon_mod.Axon()
    c.skipped = []
    have_axon = not a.no_axoncache and c.axon.fetch_and_build()
    if a.no_axoncache:
        c.skipped.append("AxonCache: left out (--no-axoncache)")
    elif not have_axon:
        c.skipped.append(c.axon.why)
    c.axon_work = os.path.join(a.dir, "axoncache")
    # C: lookup_bench with AxonCache compiled in when it is built
    want = c.axon.src if have_axon else ""
    sh(["meson", "configure", c.build, f"-Daxoncache={want}"], stdout=subprocess.DEVNULL)
    sh(["ninja", "-C", c.build, "bench/lookup_bench", "bench/mem_probe", "shmctl/shmctl",
        "loader/shmkv-loader"])
    c.lookup_bench = os.path.join(c.build, "bench", "lookup_bench")
    c.mem_probe = os.path.join(c.build, "bench", "mem_probe")
    c.shmctl = os.path.join(c.build, "shmctl", "shmctl")
    c.loader = os.path.join(c.build, "loader", "shmkv-loader")
    c.axon_c = have_axon
    # Python: a venv with this tree's package (and AxonCache's module); the
    # system site gives it matplotlib and pybind11 (Debian)
    venv = os.path.join(c.work, "venv")
    c.venv_python = os.path.join(venv, "bin", "python")
    cfg = os.path.join(venv, "pyvenv.cfg")
    made_by = open(cfg).read() if os.path.exists(cfg) else ""
    # absent, another python's, or half made (its pip comes last: a venv
    # whose ensurepip failed has none; a venv cannot be made aside and moved)
    if (f"home = {os.path.dirname(sys.executable)}\n" not in made_by
            or not os.path.exists(os.path.join(venv, "bin", "pip"))):
        shutil.rmtree(venv, ignore_errors=True)
        sh([sys.executable, "-m", "venv", "--system-site-packages", venv])
    stamp, h = os.path.join(venv, "shmkv.tree"), tree_hash("python", "lib", "builder")
    if not os.path.exists(stamp) or open(stamp).read() != h:
        sh([c.venv_python, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
            os.path.join(TOP, "python")])
        with open(stamp, "w") as f:
            f.write(h)
    c.axon_py = have_axon and "python" in a.langs and c.axon.install_python(c.venv_python)
    # Go and Java drivers
    c.go_driver = os.path.join(c.work, "go-compare")
    c.axon_go = c.axon_java = False
    if "go" in a.langs:
        env = dict(os.environ, OUT=c.go_driver)
        if have_axon:
            env["AXONCACHE"] = c.axon.src
        sh(["sh", os.path.join(TOP, "bench", "go", "build.sh")], env=env)
        c.axon_go = have_axon
    c.java_out = os.path.join(c.work, "java")
    jh = os.environ.get("JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64")
    c.java = os.path.join(jh, "bin", "java")
    if "java" in a.langs:
        try:
            sh(["sh", os.path.join(TOP, "bench", "java", "build.sh"), c.java_out]
               + ([c.axon.src] if have_axon else []), env=dict(os.environ, JAVA_HOME=jh))
            c.axon_java = have_axon
        except subprocess.CalledProcessError:
            if not have_axon:
                raise
            c.skipped.append("AxonCache's Java binding: did not build (see above); its Java "
                             "rows are skipped")
            sh(["sh", os.path.join(TOP, "bench", "java", "build.sh"), c.java_out],
               env=dict(os.environ, JAVA_HOME=jh))
    return c


def image(c, n) -> str:
    """key_N -> val_N for N < n, by this tree's shmctl, on tmpfs (4 KiB pages).
    Above 10M keys only the loader reads it (the languages do not run there,
    lookup_bench builds its own): on disk, so that it holds no memory."""
    d = c.image_dir if n <= 10_000_000 else BIG_DIR
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"kv_{n}.shmkv")
    if os.path.exists(path) and os.path.getmtime(path) > os.path.getmtime(c.shmctl):
        return path
    tsv = os.path.join("/var/tmp", f"shmkv-peers-{os.getpid()}-{n}.tsv")
    note(f"image of {n} keys: {path}")
    try:
        with open(tsv, "w") as f:
            step = 1_000_000
            for lo in range(0, n, step):
                f.write("".join(f"key_{i}\tval_{i}\n" for i in range(lo, min(n, lo + step))))
        sh([c.shmctl, "image", "build", "--format", "tsv", "-o", path + ".part", "--name",
            f"kv_{n}", "--created", "1700000000", tsv], stdout=subprocess.DEVNULL)
        os.rename(path + ".part", path)
    finally:
        if os.path.exists(tsv):
            os.unlink(tsv)
    return path


def enough_memory(c, n, what, need_bytes) -> bool:
    avail = machine.meminfo()["MemAvailable"]
    if avail < need_bytes:
        c.skipped.append(f"{what} at {n:,} keys: needs ~{need_bytes / 2**30:.1f} GiB, "
                         f"{avail / 2**30:.1f} GiB available: skipped")
        note(c.skipped[-1])
        return False
    return True


def one_size(c, a, n, pages, rows):
    img = image(c, n)
    size = os.path.getsize(img)
    raw = os.path.join(a.out, "raw", f"{n}-{pages}")
    os.makedirs(raw, exist_ok=True)
    langs = [x for x in a.langs if n <= 10_000_000 or x in ("c", "floor")]

    def body(attach):
        for rep in range(a.repeat):
            for lang in langs:
                note(f"{n:,} keys, {pages} pages, {lang} (run {rep + 1} of {a.repeat}); "
                     f"load {machine.load():.2f}")
                out = os.path.join(raw, f"{lang}-{rep}")
                os.makedirs(out, exist_ok=True)
                t0 = time.monotonic()
                try:
                    if lang == "c":
                        got = drivers.c_lookup_bench(c, n, pages, attach and attach[1], out)
                    elif lang == "floor":
                        got = drivers.floor_mem_probe(c, n, pages, size, out)
                    elif lang == "python":
                        if not enough_memory(c, n, "Python", n * 260):
                            continue
                        got = drivers.python_lookup(c, n, pages, img, attach, out)
                    elif lang == "go":
                        got = drivers.go_compare(c, n, pages, img, attach, out)
                    else:
                        got = drivers.java_compare(c, n, pages, img, attach, out)
                except RuntimeError as e:
                    c.skipped.append(f"{lang} at {n:,} keys, {pages} pages: failed: "
                                     f"{str(e).splitlines()[0]} (log in {out})")
                    note(c.skipped[-1])
                    continue
                for r in got:
                    r.update(lang=lang, keys=n, pages=pages, rep=rep)
                rows.extend(got)
                note(f"  {lang}: {time.monotonic() - t0:.0f} s")

    if pages == "4k":
        body(None)
    else:
        log = os.path.join(raw, "loader.log")
        with HugeLoader(c.loader, {f"kv_{n}": img}, c.venv_python, log) as ld:
            body((f"kv_{n}", ld.root))


def scale(c, a, res):
    """--procs processes reading the loader's cache of --scale-keys keys from
    hugetlb pages at once, then one process holding the same data in absl."""
    n = a.scale_keys
    raw = os.path.join(a.out, "raw", f"scale-{n}")
    os.makedirs(raw, exist_ok=True)
    log = os.path.join(raw, "procs.log")
    img = image(c, n)
    lookups = max(200_000, min(4_000_000, a.lookups * 2))
    out = {"keys": n, "image_bytes": os.path.getsize(img), "procs": a.procs, "lookups": lookups}
    with HugeLoader(c.loader, {f"kv_{n}": img}, c.venv_python,
                    os.path.join(raw, "loader.log")) as ld:
        m = machine.meminfo()
        out["hugetlb_bytes"] = (m["HugePages_Total"] - m["HugePages_Free"]) * (2 << 20)
        out["shmkv"] = drivers.procs_children(c, n, ld.root, a.procs, lookups, log)
    # one absl process: its data set (32 B a key) and its map (~90 B a key)
    if enough_memory(c, n, "one absl process", n * 140 + (2 << 30)):
        out["native"] = drivers.procs_children(c, n, None, 1, lookups, log)
    res["scale"] = out


def main(argv=None):
    a = parse(argv if argv is not None else sys.argv[1:])
    a.out = a.out or os.path.join(os.path.abspath(a.build), "bench", "compare")
    if os.path.exists(os.path.join(a.out, "raw")):
        shutil.rmtree(os.path.join(a.out, "raw"))
    os.makedirs(a.out, exist_ok=True)
    if os.geteuid() != 0 and "huge" in a.pages:
        sys.exit("peers: the huge pages step mounts hugetlbfs and grows the pool: run as root, "
                 "or --pages 4k")
    res = {"machine": machine.describe(), "command": "./run bench compare " + " ".join(
        sys.argv[1:] if argv is None else argv), "rounds": a.rounds, "lookups": a.lookups,
        "repeat": a.repeat, "axoncache_commit": axon_mod.COMMIT}
    res["commit"] = subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty"],
                                   capture_output=True, text=True).stdout.strip()
    c = setup(a)
    try:
        run_all(a, c, res)
    finally:
        if not a.keep_images:  # tmpfs holds memory that others on the machine need
            remove_made(a.dir)
            remove_made(BIG_DIR)


def remove_made(d):
    """What this command made in d (its images and AxonCache's caches), and d
    itself once empty; nothing else (--dir may name a shared directory)."""
    shutil.rmtree(os.path.join(d, "axoncache"), ignore_errors=True)
    for f in glob.glob(os.path.join(d, "kv_*.shmkv")):
        os.unlink(f)
    try:
        os.rmdir(d)
    except OSError:
        pass


def run_all(a, c, res):
    rows = []
    res["rows"], res["skipped"] = rows, c.skipped
    res["axoncache"] = "built" if c.axon_c else c.skipped[0] if c.skipped else "left out"

    def page():  # after every step, so that a later failure keeps what was measured
        res["machine"]["load_end"] = machine.load()
        report.write(res, a.out)

    sizes = a.keys + ([50_000_000] if a.large and 50_000_000 not in a.keys else [])
    for n in sizes:
        for pages in a.pages:
            try:
                one_size(c, a, n, pages, rows)
            except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
                c.skipped.append(f"{n:,} keys, {pages} pages: {e}")
                note(c.skipped[-1])
            page()
    if a.scale:
        try:
            scale(c, a, res)
        except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
            c.skipped.append(f"scale step: {e}")
    for s in c.skipped:
        note("skipped: " + s)
    page()
    note(f"wrote {a.out}/results.md, results.json, results.png")


if __name__ == "__main__":
    main()
