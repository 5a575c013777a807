#!/usr/bin/env python3
"""flamegraph.py - fold `perf script` stacks and draw a flame graph (SVG).

  perf script -i perf.data | perf/flamegraph.py -o out.svg [--folded out.folded] [--title T]

Reads perf script's default output (a header line per sample, then one
frame per line, leaf first, then a blank line). Each sample's stack becomes
"comm;outermost;...;leaf"; the SVG draws one box per frame, as wide as its
share of the samples, callers below callees; hovering a box shows its name,
samples and share. Exit 1 when the input holds no sample.
"""
import argparse
import html
import sys
import zlib


def fold(lines):
    """Returns {folded stack: samples} and the number of samples."""
    stacks, total = {}, 0
    head, frames = None, []

    def flush():
        nonlocal total
        if head is None:
            return
        names = [head] + [f for f in reversed(frames)] if frames else [head, "[unknown]"]
        key = ";".join(names)
        stacks[key] = stacks.get(key, 0) + 1
        total += 1

    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            head, frames = None, []
        elif line[0] not in " \t":
            flush()
            head, frames = line.split()[0], []  # the command name
        elif head is not None:
            parts = line.split(None, 1)  # address, then "symbol+0x12 (dso)"
            sym = parts[1] if len(parts) > 1 else parts[0]
            if sym.endswith(")") and " (" in sym:
                dso = sym[sym.rindex(" (") + 2:-1]
                sym = sym[:sym.rindex(" (")]
            else:
                dso = ""
            if "+0x" in sym:
                sym = sym[:sym.rindex("+0x")]
            if sym == "[unknown]" and dso:
                sym = "[" + dso.rsplit("/", 1)[-1] + "]"
            frames.append(sym.replace(";", ":"))
    flush()
    return stacks, total


def tree(stacks):
    root = {"n": 0, "c": {}}
    for key, n in stacks.items():
        node = root
        node["n"] += n
        for name in key.split(";"):
            node = node["c"].setdefault(name, {"n": 0, "c": {}})
            node["n"] += n
    return root


def color(name):
    h = zlib.crc32(name.encode())
    r = 200 + h % 55
    g = 80 + (h >> 8) % 120
    b = 40 + (h >> 16) % 50
    return "rgb(%d,%d,%d)" % (r, g, b)


def svg(root, total, title, width=1200, row=16):
    boxes, depth_max = [], 0

    def walk(node, name, x, depth):
        nonlocal depth_max
        w = node["n"] / total * (width - 20)
        if w < 0.1:
            return
        depth_max = max(depth_max, depth)
        boxes.append((name, x, depth, w, node["n"]))
        cx = x
        for cname, child in sorted(node["c"].items()):
            walk(child, cname, cx, depth + 1)
            cx += child["n"] / total * (width - 20)

    walk(root, "all", 10.0, 0)
    height = (depth_max + 1) * row + 60
    out = ['<?xml version="1.0" standalone="no"?>',
           '<svg version="1.1" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">'
           % (width, height),
           '<rect x="0" y="0" width="%d" height="%d" fill="#f8f8f8"/>' % (width, height),
           '<text x="%d" y="24" font-size="17" font-family="Verdana" text-anchor="middle">%s</text>'
           % (width // 2, html.escape(title)),
           '<text x="10" y="%d" font-size="12" font-family="Verdana">%d samples; hover a frame '
           'for its samples and share</text>' % (height - 10, total)]
    for name, x, depth, w, n in boxes:
        y = height - 30 - (depth + 1) * row
        label = "%s (%d samples, %.2f%%)" % (name, n, 100.0 * n / total)
        out.append('<g><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" '
                   'fill="%s" rx="2"/>' % (html.escape(label), x, y, w, row - 1,
                                          "#e0e0e0" if depth == 0 else color(name)))
        chars = int(w / 7)
        if chars >= 3:
            text = name if len(name) <= chars else name[:chars - 2] + ".."
            out.append('<text x="%.1f" y="%d" font-size="12" font-family="Verdana">%s</text>'
                       % (x + 3, y + row - 4, html.escape(text)))
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True, help="SVG file to write")
    ap.add_argument("--folded", help="also write the folded stacks here")
    ap.add_argument("--title", default="Flame graph")
    ap.add_argument("input", nargs="?", help="perf script output (default: stdin)")
    a = ap.parse_args()
    src = open(a.input, errors="replace") if a.input else sys.stdin
    stacks, total = fold(src)
    if total == 0:
        sys.stderr.write("flamegraph.py: no samples in the input (did perf record run long "
                         "enough, and in the right process?)\n")
        return 1
    if a.folded:
        with open(a.folded, "w") as f:
            for key in sorted(stacks):
                f.write("%s %d\n" % (key, stacks[key]))
    with open(a.output, "w") as f:
        f.write(svg(tree(stacks), total, a.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
