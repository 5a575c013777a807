"""results.md, results.json and results.png of a bench/peers run: every
figure is the median of its rounds (pooled over --repeat processes); a ratio
of two systems of one process is the median of the rounds' ratios (they ran
interleaved), of two processes the ratio of their medians."""
import json
import os
import statistics

M = 1_000_000
SIZES = {100_000: "100k", 200_000: "200k", M: "1M", 10 * M: "10M", 50 * M: "50M",
         100 * M: "100M"}
SYSTEMS = ["shmkv", "shmkv-batch", "native", "axoncache", "std", "lmdb", "cdb"]
NATIVE = {"c": "absl", "python": "dict", "go": "map", "java": "HashMap"}
LANG = {"c": "C", "python": "Python", "go": "Go", "java": "Java"}


def size(n):
    return SIZES.get(n, f"{n:,}")


class Data:
    def __init__(self, rows):
        self.p = {}  # (lang, keys, pages, system, stream) -> {rep: [passes]}
        for r in rows:
            k = (r["lang"], r["keys"], r["pages"], r["system"], r["stream"])
            self.p.setdefault(k, {}).setdefault(r.get("rep", 0), []).extend(r["passes"])

    def med(self, lang, keys, pages, system, stream):
        v = self.p.get((lang, keys, pages, system, stream))
        return statistics.median([x for r in v.values() for x in r]) if v else None

    def spread(self, *k):
        v = self.p.get(k)
        if not v:
            return None
        allv = [x for r in v.values() for x in r]
        return min(allv), max(allv)

    def ratio(self, a, b):
        """a, b: (lang, keys, pages, system, stream)."""
        pa, pb = self.p.get(a), self.p.get(b)
        if not pa or not pb:
            return None
        if a[0] == b[0]:  # one process per rep: round i of both ran together
            rs = [x / y for rep in pa if rep in pb
                  for x, y in zip(pa[rep], pb[rep]) if y > 0]
            if rs:
                return statistics.median(rs)
        ma, mb = self.med(*a), self.med(*b)
        return ma / mb if ma and mb else None

    def sizes(self, lang=None):
        return sorted({k[1] for k in self.p if lang is None or k[0] == lang})


def _goals(d, pages_run):
    """(issue, goal, [(label, value)], threshold): every figure must be <= threshold."""
    G = []
    big, mid, one = 50 * M, 10 * M, M
    pg = [p for p in ("4k", "huge") if p in pages_run]
    PG = {"4k": "4 KiB", "huge": "huge"}

    def r(label, a, b):
        return (label, d.ratio(a, b))

    G.append(("42 §3", "C single get ≤ 0.8× absl at 50M keys (full value read)", 0.8,
              [r(PG[p], ("c", big, p, "shmkv", "hit-full"), ("c", big, p, "native", "hit-full"))
               for p in pg]))
    G.append(("42 §3", "C batched get ≤ 0.25× absl at 50M keys (full value read)", 0.25,
              [r(PG[p], ("c", big, p, "shmkv-batch", "hit-full"),
                 ("c", big, p, "native", "hit-full")) for p in pg]))
    G.append(("42 §3", "C batch ≤ 25 ns a key at 10M keys (length and first byte)", 25.0,
              [(PG[p], d.med("c", mid, p, "shmkv-batch", "hit")) for p in pg]))
    for lang in ("python", "go", "java"):
        G.append(("42 §3", f"{LANG[lang]}'s batch ≤ 1.5× C's batch a key at 10M keys", 1.5,
                  [r(PG[p], (lang, mid, p, "shmkv-batch", "hit"), ("c", mid, p, "shmkv-batch", "hit"))
                   for p in pg]))
    G.append(("42 §2", "Java get ≤ 1.5× HashMap, hits and misses, 1M and 10M", 1.5,
              [r(f"{size(n)} {s} {PG[p]}", ("java", n, p, "shmkv", s), ("java", n, p, "native", s))
               for n in (one, mid) for s in ("hit", "miss") for p in pg]))
    G.append(("42 §2", "Java get ≤ 0.35× AxonCache's JNI binding, hits", 0.35,
              [r(f"{size(n)} {PG[p]}", ("java", n, p, "shmkv", "hit"), ("java", n, p, "axoncache", "hit"))
               for n in (one, mid) for p in pg]))
    G.append(("42 §2", "Java get ≤ 0.6× AxonCache's JNI binding, misses", 0.6,
              [r(f"{size(n)} {PG[p]}", ("java", n, p, "shmkv", "miss"), ("java", n, p, "axoncache", "miss"))
               for n in (one, mid) for p in pg]))
    G.append(("42 §2", "Java miss ≤ 1.2× the Go reader's miss at 1M keys", 1.2,
              [r(PG[p], ("java", one, p, "shmkv", "miss"), ("go", one, p, "shmkv", "miss")) for p in pg]))
    for stream, what in (("hit", "length and first byte"), ("hit-full", "full value read")):
        G.append(("22 §5", f"C single get ≤ 0.6× absl, 1M and 10M ({what})", 0.6,
                  [r(f"{size(n)} {PG[p]}", ("c", n, p, "shmkv", stream), ("c", n, p, "native", stream))
                   for n in (one, mid) for p in pg]))
        G.append(("22 §5", f"C single get ≤ 0.7× AxonCache, 1M and 10M ({what})", 0.7,
                  [r(f"{size(n)} {PG[p]}", ("c", n, p, "shmkv", stream), ("c", n, p, "axoncache", stream))
                   for n in (one, mid) for p in pg]))
        G.append(("22 §5", f"C batched get ≤ 0.3× absl, 1M and 10M ({what})", 0.3,
                  [r(f"{size(n)} {PG[p]}", ("c", n, p, "shmkv-batch", stream), ("c", n, p, "native", stream))
                   for n in (one, mid) for p in pg]))
    G.append(("22 §5", "C lone get (home keys) ≤ 1.2× one dependent random access", 1.2,
              [r(f"{size(n)} {PG[p]}", ("c", n, p, "shmkv", "lone-home"), ("c", n, p, "floor", "lone-chase"))
               for n in (one, mid) for p in pg]))
    G.append(("22 §2", "C lone get: displaced keys ≤ 1.15× home keys", 1.15,
              [r(f"{size(n)} {PG[p]}", ("c", n, p, "shmkv", "lone-displaced"), ("c", n, p, "shmkv", "lone-home"))
               for n in (one, mid) for p in pg]))
    G.append(("4", "C single get ≤ 0.7× absl at 1M and 10M (length and first byte)", 0.7,
              [r(f"{size(n)} {PG[p]}", ("c", n, p, "shmkv", "hit"), ("c", n, p, "native", "hit"))
               for n in (one, mid) for p in pg]))
    G.append(("4", "C batched get ≤ 0.35× absl at 10M (length and first byte)", 0.35,
              [r(PG[p], ("c", mid, p, "shmkv-batch", "hit"), ("c", mid, p, "native", "hit")) for p in pg]))
    G.append(("23", "Python cache[k] ≤ 2× a dict, hits and misses (get), 1M and 10M", 2.0,
              [r(f"{size(n)} {s} {PG[p]}", ("python", n, p, "shmkv", s), ("python", n, p, "native", s))
               for n in (one, mid) for s in ("hit", "miss") for p in pg]))
    G.append(("23", "Python cache[k] ≤ 0.5× AxonCache's module, hits", 0.5,
              [r(f"{size(n)} {PG[p]}", ("python", n, p, "shmkv", "hit"), ("python", n, p, "axoncache", "hit"))
               for n in (one, mid) for p in pg]))
    G.append(("23", "Python get_many ≤ 1.5× C's batch a key, 1M and 10M", 1.5,
              [r(f"{size(n)} {PG[p]}", ("python", n, p, "shmkv-batch", "hit"), ("c", n, p, "shmkv-batch", "hit"))
               for n in (one, mid) for p in pg]))
    G.append(("24", "Go View.Get ≤ 1.3× a map, hits and misses, 1M and 10M", 1.3,
              [r(f"{size(n)} {s} {PG[p]}", ("go", n, p, "shmkv", s), ("go", n, p, "native", s))
               for n in (one, mid) for s in ("hit", "miss") for p in pg]))
    G.append(("24", "Go View.Get ≤ 0.4× AxonCache's Go binding, hits and misses", 0.4,
              [r(f"{size(n)} {s} {PG[p]}", ("go", n, p, "shmkv", s), ("go", n, p, "axoncache", s))
               for n in (one, mid) for s in ("hit", "miss") for p in pg]))
    G.append(("24", "Go GetBatch a key ≤ 0.5× View.Get at 10M, hits and misses", 0.5,
              [r(f"{s} {PG[p]}", ("go", mid, p, "shmkv-batch", s), ("go", mid, p, "shmkv", s))
               for s in ("hit", "miss") for p in pg]))
    return G


def goals(d, pages_run):
    out = []
    for issue, text, thr, figs in _goals(d, pages_run):
        have = [(lab, v) for lab, v in figs if v is not None]
        unit = "ns" if thr >= 10 else "×"
        meas = ", ".join(f"{lab} {v:.1f} ns" if unit == "ns" else f"{lab} {v:.2f}"
                         for lab, v in have) or "not measured in this run"
        if not have:
            verdict = "-"
        elif all(v <= thr for _, v in have):
            verdict = "met"
        elif any(v <= thr for _, v in have):
            verdict = "missed (met: " + ", ".join(lab for lab, v in have if v <= thr) + ")"
        else:
            verdict = "missed"
        out.append({"issue": issue, "goal": text, "threshold": thr, "measured": meas,
                    "figures": dict(have), "verdict": verdict})
    return out


def _ns(v):
    return "-" if v is None else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _x(v):
    return "-" if v is None else f"{v:.2f}"


def markdown(res, d):
    m = res["machine"]
    L = ["# shmkv against its peers", ""]
    L.append(f"- CPU: **{m['cpu']}**, {m['nproc']} CPUs, {m['mem_total_gib']} GiB "
             f"({m['mem_available_gib']} available at the start); kernel {m['kernel']}; "
             f"transparent huge pages: {m['thp']}")
    L.append(f"- {m['date']}; load average {m['load_start']:.2f} at the start, "
             f"{m['load_end']:.2f} at the end (figures taken above ~1.5 on 2 cores are noisy)")
    L.append(f"- command: `{res['command']}` at `{res['commit']}`; {res['rounds']} rounds of "
             f"{res['lookups']:,} lookups a system and stream per process, "
             f"{res['repeat']} process(es) each; ns of the thread's CPU time a lookup, medians")
    L.append(f"- AxonCache at `{res['axoncache_commit'][:12]}`: {res['axoncache']}")
    L += ["", "## Goals", "", "| issue | goal | measured | verdict |", "|---|---|---|---|"]
    for g in res["goals"]:
        L.append(f"| {g['issue']} | {g['goal']} | {g['measured']} | {g['verdict']} |")
    for lang in ("c", "python", "go", "java"):
        sizes = d.sizes(lang)
        if not sizes:
            continue
        systems = [s for s in SYSTEMS if any(k[0] == lang and k[3] == s for k in d.p)]
        L += ["", f"## {LANG[lang]}", "",
              "| keys | pages | stream | " + " | ".join(
                  NATIVE[lang] if s == "native" else s for s in systems)
              + f" | shmkv ÷ {NATIVE[lang]} | shmkv ÷ AxonCache | batch ÷ {NATIVE[lang]} |",
              "|---|---|---|" + "---|" * (len(systems) + 3)]
        for n in sizes:
            for p in ("4k", "huge"):
                for s in ("hit", "hit-full", "miss", "in"):
                    vals = [d.med(lang, n, p, x, s) for x in systems]
                    if all(v is None for v in vals):
                        continue
                    L.append(f"| {size(n)} | {p} | {s} | " + " | ".join(_ns(v) for v in vals)
                             + f" | {_x(d.ratio((lang, n, p, 'shmkv', s), (lang, n, p, 'native', s)))}"
                             + f" | {_x(d.ratio((lang, n, p, 'shmkv', s), (lang, n, p, 'axoncache', s)))}"
                             + f" | {_x(d.ratio((lang, n, p, 'shmkv-batch', s), (lang, n, p, 'native', s)))} |")
    sizes = sorted({k[1] for k in d.p if k[3] == "floor" or k[4].startswith("lone")})
    if sizes:
        L += ["", "## The machine's floor and C's lone gets", "",
              "Lone gets: each get waits for the one before (C, lookup_bench's latency phase, "
              "p50); `chase`: one dependent random access over a buffer of the image's size, "
              "timed the same way. `K in flight`: mem_probe's K pointer chains stepped in turn, "
              "ns an access: how far the memory system overlaps independent misses.", "",
              "| keys | pages | lone home | lone displaced | lone home, full read | chase | "
              "home ÷ chase | 1 in flight | 2 | 4 | 8 | 16 |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in sizes:
            for p in ("4k", "huge"):
                lone = [d.med("c", n, p, "shmkv", s) for s in ("lone-home", "lone-displaced", "lone-home-full")]
                ch = d.med("c", n, p, "floor", "lone-chase")
                fl = [d.med("floor", n, p, "floor", f"chains-{k}") for k in (1, 2, 4, 8, 16)]
                if all(v is None for v in lone + [ch] + fl):
                    continue
                L.append(f"| {size(n)} | {p} | " + " | ".join(_ns(v) for v in lone + [ch])
                         + f" | {_x(lone[0] / ch if lone[0] and ch else None)} | "
                         + " | ".join(_ns(v) for v in fl) + " |")
    sc = res.get("scale")
    if sc:
        L += ["", f"## {sc['procs']} reader processes at once, {size(sc['keys'])} keys", "",
              f"The image ({sc['image_bytes'] / 2**30:.2f} GiB) served by shmkv-loader from "
              f"2 MiB hugetlb pages ({sc['hugetlb_bytes'] / 2**30:.2f} GiB in use, held once "
              "by the loader's segment; smaps counts hugetlb pages in no process's Rss or Pss), "
              f"each process attached and made {sc['lookups']:,} uniform random gets while the "
              "others did; then one process holding the same data in an absl map. ns a get: "
              "thread CPU time (wall clock in parentheses).", "",
              "| process | ns a get | Rss | Pss | Pss anon | hugetlb mapped |", "|---|---|---|---|---|---|"]
        for who in ("shmkv", "native"):
            for p in sc.get(who, []):
                L.append(f"| {'shmkv' if who == 'shmkv' else 'absl'} {p['index']} | "
                         f"{p['ns_per_get']:.0f} ({p['wall_ns_per_get']:.0f}) | "
                         f"{p['rss'] / 2**20:.1f} MiB | {p['pss'] / 2**20:.1f} MiB | "
                         f"{p['pss_anon'] / 2**20:.1f} MiB | {p['hugetlb'] / 2**30:.2f} GiB |")
    if res["skipped"]:
        L += ["", "## Left out", ""] + [f"- {s}" for s in res["skipped"]]
    L += ["", "Raw outputs (every driver's log and JSON): `raw/` beside this file. "
          "Method: bench/README.md, \"Compare\"."]
    return "\n".join(L) + "\n"


def plot(d, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing (Debian: python3-matplotlib): no PNG"
    langs = [x for x in ("c", "python", "go", "java") if d.sizes(x)]
    if not langs:
        return "nothing to plot"
    fig, axes = plt.subplots(1, len(langs), figsize=(4.5 * len(langs), 4.2), squeeze=False)
    colors = {"shmkv": "C0", "shmkv-batch": "C9", "native": "C2", "axoncache": "C3",
              "std": "C7", "lmdb": "C5", "cdb": "C4"}
    for ax, lang in zip(axes[0], langs):
        groups = [(n, p) for n in d.sizes(lang) for p in ("4k", "huge")
                  if d.med(lang, n, p, "shmkv", "hit") is not None]
        systems = [s for s in SYSTEMS if any(d.med(lang, n, p, s, "hit") for n, p in groups)]
        w = 0.8 / max(1, len(systems))
        for j, s in enumerate(systems):
            ys = [d.med(lang, n, p, s, "hit") or 0 for n, p in groups]
            ax.bar([i + j * w for i in range(len(groups))], ys, w, color=colors.get(s),
                   label=NATIVE[lang] if s == "native" else s)
        fl = [d.med("floor", n, p, "floor", "chains-1") for n, p in groups]
        for i, v in enumerate(fl):
            if v:
                ax.hlines(v, i - w / 2, i + 0.8 - w / 2, colors="k", linestyles="dashed",
                          label="one random access" if i == 0 else None)
        ax.set_xticks([i + 0.4 - w / 2 for i in range(len(groups))])
        ax.set_xticklabels([f"{size(n)}\n{p}" for n, p in groups])
        ax.set_title(f"{LANG[lang]}: hits")
        ax.set_ylabel("ns a get (thread CPU time)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return None


def write(res, out):
    d = Data(res["rows"])
    pages_run = sorted({r["pages"] for r in res["rows"]})
    res["goals"] = goals(d, pages_run)
    res["summary"] = [{"lang": k[0], "keys": k[1], "pages": k[2], "system": k[3], "stream": k[4],
                       "ns_median": d.med(*k), "ns_min": d.spread(*k)[0], "ns_max": d.spread(*k)[1]}
                      for k in sorted(d.p)]
    why = plot(d, os.path.join(out, "results.png"))
    if why and "PNG: " + why not in res["skipped"]:
        res["skipped"].append("PNG: " + why)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(res, d))
