"""Each reader's driver, run once for one table size and one kind of pages;
every one returns rows {lang, system, stream, passes} (ns of the thread's CPU
time a lookup, one figure per round, rounds interleaved across systems).

System names are the same in every language: shmkv (the single get),
shmkv-batch (64 keys a call, per key), native (the language's own map:
absl::flat_hash_map, dict, map[string]string, HashMap<String,String>),
axoncache; C adds std (std::unordered_map), lmdb and cdb. Streams: hit
(uniform random present keys; C reads the value's length and first byte),
hit-full (C: every value byte), miss (absent keys), in (Python: `k in`);
C's lone gets (each waits for the one before): lone-home, lone-displaced,
lone-home-full, lone-displaced-full, and lone-chase (one dependent random
access over a buffer of the image's size: the floor under a lone get)."""
import json
import os
import subprocess
import sys

C_NAMES = {"shmkv": "shmkv", "shmkv-batch": "shmkv-batch", "absl": "native", "std": "std",
           "lmdb": "lmdb", "cdb": "cdb", "axoncache": "axoncache"}
C_STREAMS = {"uniform": "hit", "uniform-full": "hit-full", "miss100": "miss"}
PY_NAMES = {"shmkv": "shmkv", "shmkv-many": "shmkv-batch", "dict": "native",
            "axoncache": "axoncache"}
GO_NAMES = {"get": "shmkv", "batch": "shmkv-batch", "map": "native", "axon": "axoncache"}
JAVA_NAMES = {"get": "shmkv", "batch": "shmkv-batch", "hashmap": "native", "axon": "axoncache"}


def run(cmd, log, env=None, timeout=None):
    """Runs cmd with its output appended to log; raises with the log's tail."""
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout)
    if r.returncode:
        with open(log) as f:
            lines = [x for x in f.read().splitlines() if x.strip()]
        why = next((x.strip() for x in reversed(lines) if "rror" in x or "xception" in x),
                   lines[-1].strip() if lines else "")
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited {r.returncode}: {why}")


def c_lookup_bench(ctx, n, pages, attach_root, out):
    """lookup_bench: shmkv, its batch, absl, std, LMDB, tinycdb, AxonCache in
    one process, passes round-robin; then its latency phase (lone gets and
    the pointer chase)."""
    systems = ["shmkv", "shmkv-batch", "absl"]
    if pages == "4k" and n <= 10_000_000:  # above, their builds take most of the run
        systems += ["std", "lmdb", "cdb"]
    if ctx.axon_c:
        systems.append("axoncache")
    cmd = [ctx.lookup_bench, "--keys", str(n), "--phases", "strings,latency",
           "--latency-keys", str(n), "--latency-lookups", str(ctx.lone_lookups),
           "--misses", "all", "--systems", ",".join(systems), "--reps", str(ctx.rounds),
           "--lookups", str(ctx.lookups), "--dir", ctx.image_dir, "--out", out]
    env = dict(os.environ)
    if attach_root:
        cmd += ["--attach", attach_root]
        # the maps on transparent huge pages too (glibc's malloc), as the image
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    if ctx.axon_c:
        env["LD_LIBRARY_PATH"] = ctx.axon.lib
    run(cmd, os.path.join(out, "run.log"), env=env)
    with open(os.path.join(out, "results.json")) as f:
        j = json.load(f)
    rows = []
    for t in j["timings"]:
        if t["workload"] in C_STREAMS and t["system"] in C_NAMES:
            rows.append({"system": C_NAMES[t["system"]], "stream": C_STREAMS[t["workload"]],
                         "passes": t["cpu_ns_passes"], "notes": t.get("notes", "")})
    for lat in j["latency"]:
        cls = lat["class"]
        stream = ("lone-" + cls) if cls in ("home", "displaced", "home-full", "displaced-full") \
            else "lone-chase"
        rows.append({"system": "floor" if stream == "lone-chase" else "shmkv", "stream": stream,
                     "passes": [lat["p50_ns"]], "notes": cls})
    return rows


def floor_mem_probe(ctx, n, pages, image_bytes, out):
    """mem_probe over a buffer of the image's size: K dependent chains in
    turn; K = 1 is one dependent random access, larger K how many the core
    keeps in flight."""
    mib = max(8, image_bytes >> 20)
    log = os.path.join(out, "mem_probe.log")
    cmd = [ctx.mem_probe, "-m", str(mib), "-p", "thp" if pages == "huge" else "4k",
           "-r", str(ctx.rounds)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode:
        raise RuntimeError(f"mem_probe exited {r.returncode}: {r.stderr.strip()}")
    rows = []
    for line in r.stdout.splitlines():
        kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
        if line.startswith("chase") and "chains" in kv:
            rows.append({"system": "floor", "stream": f"chains-{kv['chains']}",
                         "passes": [float(kv["ns_per_access"])], "notes": f"{mib} MiB"})
    return rows


def python_lookup(ctx, n, pages, image, attach, out):
    js = os.path.join(out, "python.json")
    cmd = [ctx.venv_python, os.path.join(ctx.top, "bench", "python", "lookup.py"), "--keys",
           str(n), "--lookups", str(ctx.lookups), "--rounds", str(ctx.rounds), "--json", js]
    cmd += ["--attach", attach[0], "--root", attach[1]] if attach else ["--image", image]
    if ctx.axon_py:
        cmd += ["--axon", "--axon-dir", os.path.join(ctx.axon_work, f"py-{n}")]
    run(cmd, os.path.join(out, "python.log"))
    return _rows(js, PY_NAMES)


def go_compare(ctx, n, pages, image, attach, out):
    js = os.path.join(out, "go.json")
    systems = "map,get,batch" + (",axon" if ctx.axon_go else "")
    cmd = [ctx.go_driver, "-n", str(n), "-rounds", str(ctx.rounds), "-lookups",
           str(ctx.lookups), "-systems", systems, "-json", js]
    cmd += ["-attach", attach[0], "-root", attach[1]] if attach else ["-img", image]
    if ctx.axon_go:
        cmd += ["-axdir", os.path.join(ctx.axon_work, f"go-{n}")]
    run(cmd, os.path.join(out, "go.log"))
    return _rows(js, GO_NAMES)


def java_compare(ctx, n, pages, image, attach, out):
    js = os.path.join(out, "java.json")
    heap = max(2, (n * 160) >> 30) + 2  # a HashMap<String,String> entry with its strings
    cp = [os.path.join(ctx.java_out, "driver"), os.path.join(ctx.java_out, "shmkv.jar")]
    with open(os.path.join(ctx.java_out, "deps.classpath")) as f:  # build.sh
        cp += [x for x in f.read().strip().split(":") if x]
    if ctx.axon_java:
        cp.insert(1, os.path.join(ctx.java_out, "classes"))
    cmd = [ctx.java, f"-Xmx{heap}g", "-XX:+UseParallelGC", "--enable-native-access=ALL-UNNAMED",
           "-cp", ":".join(cp), "Compare", "--keys", str(n), "--rounds", str(ctx.rounds),
           "--lookups", str(ctx.lookups), "--json", js]
    if pages == "huge":
        cmd.insert(1, "-XX:+UseTransparentHugePages")
    cmd += ["--attach", attach[0], "--root", attach[1]] if attach else ["--image", image]
    if ctx.axon_java:
        cmd += ["--axon-dir", os.path.join(ctx.axon_work, f"java-{n}")]
    run(cmd, os.path.join(out, "java.log"))
    return _rows(js, JAVA_NAMES)


def _rows(path, names):
    with open(path) as f:
        j = json.load(f)
    return [{"system": names.get(r["system"], r["system"]), "stream": r["stream"],
             "passes": r["ns"], "notes": ""} for r in j["rows"]]


def procs_children(ctx, n, attach_root, k, lookups, log):
    """k reader processes at once (lookup_bench --proc-child): each maps the
    loader's cache kv_N (attach:ROOT) or, with attach_root None, builds its
    own absl map; each makes `lookups` uniform gets, then all wait until
    every one is done and each reads its smaps_rollup."""
    system, path = ("shmkv", "attach:" + attach_root) if attach_root else ("absl", "-")
    kids = []
    with open(log, "a") as lf:
        for i in range(k):
            cmd = [ctx.lookup_bench, "--proc-child", system, path, str(n), str(4242 + i),
                   str(lookups)]
            lf.write("$ " + " ".join(cmd) + "\n")
            kids.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=lf, text=True))
    out = []
    try:
        for c in kids:
            if c.stdout.readline() != "ready\n":
                raise RuntimeError(f"{system} reader process {c.pid} did not get ready; see {log}")
        for c in kids:
            c.stdin.write("g")
            c.stdin.flush()
        for i, c in enumerate(kids):
            f = c.stdout.readline().split()
            if len(f) != 12 or f[0] != "result":
                raise RuntimeError(f"{system} reader process {c.pid} sent no result; see {log}")
            v = [float(x) for x in f[1:]]
            out.append({"system": "shmkv" if attach_root else "native", "index": i,
                        "open_s": v[0], "wall_ns_per_get": v[1], "ns_per_get": v[10],
                        "rss": int(v[2]), "pss": int(v[3]), "pss_anon": int(v[4]),
                        "hugetlb": int(v[9])})
    finally:
        for c in kids:
            try:
                c.stdin.close()
            except OSError:
                pass
            c.wait()
    for c in kids:
        if c.returncode:
            raise RuntimeError(f"{system} reader process {c.pid} exited {c.returncode}; see {log}")
    return out


def note(msg):
    print("peers: " + msg, file=sys.stderr, flush=True)
