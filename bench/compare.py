#!/usr/bin/env python3
"""compare.py - the effect of a change, from two lookup_bench result directories.

usage: bench/compare.py [--fail-above PCT] [--threshold PCT] OLD NEW

OLD and NEW are --out directories of lookup_bench (./run bench) or their
results.json. For every measurement both runs hold, it prints OLD, NEW and
NEW/OLD, and says whether the change is outside the noise:

  timings     ns per get (median pass), with the spread of each run's
              repeated passes as the noise bound: a change counts only when
              the two runs' passes do not overlap ([best, worst] of each);
              the ratio against absl measured in the same run is compared
              too (the steadier figure on a shared machine)
  threads     million gets per second (median), passes as above
  cachegrind  instructions, D1/LL misses, branches, mispredicts per get:
              deterministic, so any change beyond --threshold (0.5%) counts
  counters    hardware counters per get (cycles, instructions, LLC and
              branch misses) where both runs had them

(Not "bench/compare": a file named compare in bench/, an include directory
of lookup_bench, would shadow C++'s <compare> header.)

Exit status: 0; 1 when --fail-above PCT is given and a change outside the
noise makes something PCT% slower (or cachegrind counts PCT% higher); 2 on
bad usage or unreadable input.
"""
import argparse
import json
import os
import sys


def die(msg):
    sys.stderr.write("compare: %s\n" % msg)
    sys.exit(2)


def load(path):
    p = os.path.join(path, "results.json") if os.path.isdir(path) else path
    try:
        with open(p) as f:
            d = json.load(f)
    except OSError as e:
        die("%s: %s" % (p, e.strerror))
    except ValueError as e:
        die("%s: not valid JSON (%s)" % (p, e))
    if not isinstance(d, dict) or d.get("bench") != "lookup_bench":
        die("%s: not a lookup_bench results.json (no \"bench\": \"lookup_bench\")" % p)
    return p, d


def rows(d, section, key):
    out = {}
    for r in d.get(section, []) or []:
        try:
            out[key(r)] = r
        except (KeyError, TypeError):
            continue
    return out


def pct(r):
    return "%+.1f%%" % ((r - 1) * 100)


class Cmp:
    def __init__(self, fail_above):
        self.fail_above = fail_above
        self.worse = []

    def note(self, what, ratio, significant, higher_is_worse=True):
        if self.fail_above is None or not significant:
            return
        bad = ratio - 1 if higher_is_worse else 1 / ratio - 1 if ratio > 0 else 0
        if bad * 100 > self.fail_above:
            self.worse.append("%s: %s (%.1f%% worse)" % (what, pct(ratio), bad * 100))


def verdict_passes(a, b, higher_is_worse=True):
    """Changed beyond noise when the passes' ranges do not overlap."""
    if not a or not b:
        return "?", False
    if min(b) > max(a):
        return ("slower" if higher_is_worse else "faster"), True
    if max(b) < min(a):
        return ("faster" if higher_is_worse else "slower"), True
    return "within noise", False


def spread(v):
    m = sorted(v)[len(v) // 2] if v else 0
    return (max(v) - min(v)) / 2 / m * 100 if v and m else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--fail-above", type=float, metavar="PCT",
                    help="exit 1 when a change outside the noise is PCT%% worse")
    ap.add_argument("--threshold", type=float, default=0.5, metavar="PCT",
                    help="cachegrind: smallest change that counts (default 0.5)")
    a = ap.parse_args()
    if a.fail_above is not None and a.fail_above < 0:
        ap.error("--fail-above takes a percentage >= 0")
    po, old = load(a.old)
    pn, new = load(a.new)
    c = Cmp(a.fail_above)
    print("# bench/compare.py\n\nOLD: `%s` (%s, %s)  \nNEW: `%s` (%s, %s)\n"
          % (po, old.get("date", "?"), old.get("command", "?"),
             pn, new.get("date", "?"), new.get("command", "?")))
    for f in ("cpu", "compiler", "probe", "ndebug"):
        if old.get(f) != new.get(f):
            print("Note: %s differs: %r vs %r\n" % (f, old.get(f), new.get(f)))
    common = 0

    k = lambda r: (r["keys"], r["workload"], r["system"])
    to, tn = rows(old, "timings", k), rows(new, "timings", k)
    both = [x for x in to if x in tn and "ns_per_get_median" in to[x] and "ns_per_get_median" in tn[x]]
    if both:
        common += len(both)
        print("## ns per get (median pass; noise: the passes' half-spread)\n")
        print("| keys | workload | system | OLD ns | NEW ns | NEW/OLD | noise OLD, NEW | "
              "x absl OLD | x absl NEW | verdict |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---|")
        for x in sorted(both):
            ro, rn = to[x], tn[x]
            mo, mn = ro["ns_per_get_median"], rn["ns_per_get_median"]
            ratio = mn / mo if mo else float("nan")
            v, sig = verdict_passes(ro.get("ns_passes"), rn.get("ns_passes"))
            c.note("%s %s %s ns/get" % x, ratio, sig)
            print("| %d | %s | %s | %.1f | %.1f | %.3f (%s) | ±%.1f%%, ±%.1f%% | %s | %s | %s |"
                  % (x[0], x[1], x[2], mo, mn, ratio, pct(ratio), spread(ro.get("ns_passes")),
                     spread(rn.get("ns_passes")),
                     "%.3f" % ro["ratio_vs_absl"] if "ratio_vs_absl" in ro else "-",
                     "%.3f" % rn["ratio_vs_absl"] if "ratio_vs_absl" in rn else "-", v))
        print()
        hw = [x for x in both if "instructions" in to[x] and "instructions" in tn[x]]
        if hw:
            print("## hardware counters per get\n")
            print("| keys | workload | system | counter | OLD | NEW | NEW/OLD |")
            print("|---:|---|---|---|---:|---:|---:|")
            for x in sorted(hw):
                for ctr in ("cycles", "instructions", "llc_misses", "branch_misses"):
                    o, n = to[x].get(ctr), tn[x].get(ctr)
                    if o is None or n is None:
                        continue
                    print("| %d | %s | %s | %s | %.3f | %.3f | %s |"
                          % (x[0], x[1], x[2], ctr, o, n, pct(n / o) if o else "-"))
            print()

    k = lambda r: (r["keys"], r["system"], r["threads"])
    ho, hn = rows(old, "threads", k), rows(new, "threads", k)
    both = [x for x in ho if x in hn]
    if both:
        common += len(both)
        print("## threads: million gets per second (median of passes)\n")
        print("| keys | system | threads | OLD | NEW | NEW/OLD | verdict |")
        print("|---:|---|---:|---:|---:|---:|---|")
        for x in sorted(both):
            mo, mn = ho[x]["mops_median"], hn[x]["mops_median"]
            ratio = mn / mo if mo else float("nan")
            v, sig = verdict_passes(ho[x].get("mops"), hn[x].get("mops"), higher_is_worse=False)
            c.note("%s %s %d threads Mops" % x, ratio, sig, higher_is_worse=False)
            print("| %d | %s | %d | %.2f | %.2f | %.3f (%s) | %s |"
                  % (x[0], x[1], x[2], mo, mn, ratio, pct(ratio), v))
        print()

    k = lambda r: (r["keys"], r["system"], r["kind"])
    co, cn = rows(old, "cachegrind", k), rows(new, "cachegrind", k)
    both = [x for x in co if x in cn]
    if both:
        common += len(both)
        print("## cachegrind, per get (deterministic: a change over %.1f%% counts)\n" % a.threshold)
        print("| keys | system | kind | counter | OLD | NEW | NEW/OLD | verdict |")
        print("|---:|---|---|---|---:|---:|---:|---|")
        for x in sorted(both):
            for ctr in ("instructions", "d1_misses", "ll_misses", "branches", "mispredicts"):
                o, n = co[x].get(ctr), cn[x].get(ctr)
                if o is None or n is None:
                    continue
                ratio = n / o if o else (1.0 if n == 0 else float("inf"))
                sig = abs(ratio - 1) * 100 > a.threshold
                v = ("higher" if ratio > 1 else "lower") if sig else "same"
                c.note("%s %s %s %s" % (x[0], x[1], x[2], ctr), ratio, sig)
                print("| %d | %s | %s | %s | %.3f | %.3f | %.4f (%s) | %s |"
                      % (x[0], x[1], x[2], ctr, o, n, ratio, pct(ratio), v))
        print()

    if common == 0:
        die("%s and %s have no measurement in common (same --keys, --phases and "
            "--systems?)" % (po, pn))
    if c.worse:
        print("**Worse by more than %g%%, outside the noise:** %s" % (a.fail_above, "; ".join(c.worse)))
        return 1
    if a.fail_above is not None:
        print("Nothing worse by more than %g%% outside the noise." % a.fail_above)
    return 0


if __name__ == "__main__":
    sys.exit(main())
