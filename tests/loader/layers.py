#!/usr/bin/env python3
"""layers.py - the loader's files depend on each other one way.

Derives, from the code, the graph between loader/*.c files: a.c -> b.c when
a.c uses a function (or global) that b.c defines, or includes b.h (directly
or through another of our headers). Fails when the graph has a cycle, or an
edge goes up the layers of loader/README.md's file table (column "layer":
a file may use files of its own layer or below, never above), or a .c file
is missing from the table, or the table names a .c file that is gone.

usage: layers.py LOADER_DIR         check loader/
       layers.py --self-test        check that the check catches a cycle
       layers.py -v LOADER_DIR      also print the graph
Exit 0: fine; 1: a violation (printed); 2: usage or unreadable input.
"""
import os
import re
import sys
import tempfile

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "__attribute__",
            "__typeof__", "_Static_assert", "static_assert", "defined"}


def strip(text):
    """C source without comments, string/char literals or preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    return re.sub(r"^[ \t]*#.*$", "", text, flags=re.M)


def definitions(code):
    """Names of the non-static functions and variables defined at file scope."""
    names, depth, stmt = set(), 0, ""
    for ch in code:
        if depth:
            depth += ch == "{"
            depth -= ch == "}"
            continue
        if ch in "{;":
            head = " ".join(stmt.split())
            local = re.match(r"(static|typedef|extern)\b", head)
            if ch == "{" and "(" in head and "=" not in head.split("(")[0] and not local:
                m = re.search(r"(\w+)\s*\(", head)  # first name( : the function
                if m and m.group(1) not in KEYWORDS:
                    names.add(m.group(1))
            elif ch == ";" and head and "(" not in head and not local:
                m = re.match(r"[\w\s\*]+?\b(\w+)\s*(\[[^\]]*\])?\s*(=.*)?$", head)
                if m and not re.match(r"(struct|enum|union)\s+\w+$", head):
                    names.add(m.group(1))
            if ch == "{":
                depth = 1 if "(" in head or "=" in head else 0
                # struct/enum bodies at file scope: skip them as a block too
                if not depth and re.match(r"(struct|enum|union)\b", head):
                    depth = 1
            stmt = ""
        else:
            stmt += ch
    return names


def includes(path):
    with open(path, encoding="utf-8") as f:
        return re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', f.read(), flags=re.M)


def graph(d):
    cfiles = sorted(f for f in os.listdir(d) if f.endswith(".c"))
    code, owner = {}, {}
    for f in cfiles:
        with open(os.path.join(d, f), encoding="utf-8") as fh:
            code[f] = strip(fh.read())
        for name in definitions(code[f]):
            owner.setdefault(name, f)
    edges = {}

    def add(a, b, why):
        if a != b:
            edges.setdefault((a, b), set()).add(why)

    for f in cfiles:
        for tok in set(re.findall(r"\b[A-Za-z_]\w*\b", code[f])):
            if tok in owner:
                add(f, owner[tok], tok)
        # includes, followed through our own headers
        seen, todo = set(), list(includes(os.path.join(d, f)))
        while todo:
            h = todo.pop()
            if h in seen or not os.path.exists(os.path.join(d, h)):
                continue
            seen.add(h)
            c = h[:-2] + ".c"
            if h.endswith(".h") and c in code:
                add(f, c, "#include " + h)
            todo.extend(includes(os.path.join(d, h)))
    return cfiles, edges


def find_cycle(nodes, edges):
    succ = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}
    state, stack = {}, []

    def dfs(n):
        state[n] = 1
        stack.append(n)
        for m in succ[n]:
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = dfs(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in nodes:
        if not state.get(n):
            c = dfs(n)
            if c:
                return c
    return None


def layers(readme):
    """{file: layer} from the README's table rows: | `a.c`, `a.h` | LAYER | what |"""
    out = {}
    with open(readme, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\|([^|]*)\|\s*(\d+)\s*\|", line)
            if m:
                for name in re.findall(r"`([\w.]+\.c)`", m.group(1)):
                    out[name] = int(m.group(2))
    return out


def check(d, verbose=False):
    nodes, edges = graph(d)
    bad = []
    if verbose:
        for (a, b), why in sorted(edges.items()):
            print(f"{a} -> {b}: {', '.join(sorted(why))}")
    cyc = find_cycle(nodes, edges)
    if cyc:
        hops = [f"{a} -> {b} ({', '.join(sorted(edges[(a, b)]))})" for a, b in zip(cyc, cyc[1:])]
        bad.append("dependency cycle: " + "; ".join(hops))
    readme = os.path.join(d, "README.md")
    if os.path.exists(readme):
        lay = layers(readme)
        for n in nodes:
            if n not in lay:
                bad.append(f"{n} is not in {readme}'s file table (with its layer)")
        for n in sorted(lay):
            if n not in nodes:
                bad.append(f"{readme}'s file table names {n}, which does not exist")
        for (a, b), why in sorted(edges.items()):
            if a in lay and b in lay and lay[a] < lay[b]:
                bad.append(f"{a} (layer {lay[a]}) uses {b} (layer {lay[b]}), a higher layer: "
                           + ", ".join(sorted(why)))
    for b in bad:
        print("layers: " + b)
    return 1 if bad else 0


def self_test():
    """The check must catch a cycle through a call and through an include."""
    cases = {
        "call": {"a.c": "int a(void)\n{\n\treturn b();\n}\n",
                 "b.c": "static int x;\nint b(void)\n{\n\treturn a() + x;\n}\n"},
        "include": {"a.c": '#include "b.h"\nint a(void)\n{\n\treturn 0;\n}\n',
                    "b.h": "int b(void);\n",
                    "b.c": "int b(void)\n{\n\treturn a();\n}\n"},
        "layer": {"a.c": "int a(void)\n{\n\treturn b();\n}\n",
                  "b.c": "int b(void)\n{\n\treturn 0;\n}\n",
                  "README.md": "| `a.c` | 0 | x |\n| `b.c` | 1 | y |\n"},
    }
    for name, files in cases.items():
        with tempfile.TemporaryDirectory() as t:
            for f, text in files.items():
                with open(os.path.join(t, f), "w", encoding="utf-8") as fh:
                    fh.write(text)
            if check(t) != 1:
                print(f"layers: self-test {name}: the violation was not found")
                return 1
    with tempfile.TemporaryDirectory() as t:  # and a clean one passes
        for f, text in {"a.c": "int a(void)\n{\n\treturn b();\n}\n",
                        "b.c": "int b(void)\n{\n\treturn 0;\n}\n"}.items():
            with open(os.path.join(t, f), "w", encoding="utf-8") as fh:
                fh.write(text)
        if check(t) != 0:
            print("layers: self-test clean: a one-way graph was refused")
            return 1
    print("layers: self-test ok")
    return 0


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    if args == ["--self-test"]:
        return self_test()
    if len(args) != 1 or not os.path.isdir(args[0]):
        print(__doc__, file=sys.stderr)
        return 2
    return check(args[0], verbose)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
