#!/usr/bin/python3
"""plot.py - draw lookup_bench's results.json as a PNG.

usage: /usr/bin/python3 bench/plot.py results.json results.png

Panels: ns per get against table size for each string workload (uniform,
zipf, miss50), one line per system, log-log; thread scaling (million lookups
per second against threads) when the run has it. Needs python3-matplotlib
(Debian); use /usr/bin/python3, a pyenv python3 may lack it.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {  # system: (colour, marker)
    "shmkv": ("tab:red", "o"),
    "shmkv-batch": ("tab:orange", "s"),
    "absl": ("tab:blue", "^"),
    "std": ("tab:cyan", "v"),
    "lmdb": ("tab:green", "D"),
    "cdb": ("tab:purple", "P"),
}


def fmt_keys(n, _pos=None):
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        r = json.load(f)
    workloads = [w for w in ("uniform", "zipf", "miss50")
                 if any(t["workload"] == w for t in r["timings"])]
    panels = len(workloads) + (1 if r.get("threads") else 0)
    if panels == 0:
        sys.exit("plot.py: nothing to plot")
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.2), squeeze=False)
    axes = axes[0]
    systems = []
    for t in r["timings"]:
        if t["system"] not in systems:
            systems.append(t["system"])
    for ax, w in zip(axes, workloads):
        for s in systems:
            pts = sorted((t["keys"], t["ns_per_get_median"]) for t in r["timings"]
                         if t["workload"] == w and t["system"] == s and "ns_per_get_median" in t)
            if not pts:
                continue
            colour, marker = STYLE.get(s, ("black", "x"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour,
                    label=s)
        ax.set_xscale("log")
        ax.set_yscale("log")
        keys = sorted({t["keys"] for t in r["timings"] if t["workload"] == w})
        ax.set_xticks(keys)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(fmt_keys))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("keys in the table")
        ax.set_ylabel("ns per get (median pass)")
        ax.set_title(f"{w}")
        ax.grid(True, which="both", alpha=0.3)
    if r.get("threads"):
        ax = axes[len(workloads)]
        for s in systems:
            pts = sorted((t["threads"], t["mops_median"]) for t in r["threads"] if t["system"] == s)
            if not pts:
                continue
            colour, marker = STYLE.get(s, ("black", "x"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour,
                    label=s)
        ax.set_xlabel("threads")
        ax.set_ylabel("million lookups per second")
        ax.set_title(f"thread scaling, {fmt_keys(r['threads'][0]['keys'])} keys")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle(f"shmkv lookup_bench, probe {r.get('probe', '?')}, {r.get('cpu', '')}, "
                 f"{r.get('nproc', '?')} CPUs, {r.get('date', '')}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
