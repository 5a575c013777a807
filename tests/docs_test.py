#!/usr/bin/env python3
"""docs: each directory's README says what is there and who links whom.

- every directory with a README.md names each of its files and
  subdirectories (build plumbing aside: meson.build, meson_options.txt,
  .gitignore; a family of data files may be named by its pattern, `*.img`);
  the file list is the source tree's, not a list kept here;
- the code directories' READMEs (lib, builder, common, numa, loader,
  shmctl, examples/bpf) carry two lines, "Depends on (ours): ..." and
  "Used by (ours): ...", that match the meson build graph: a target defined
  in directory A that compiles with B's include directory (B's dependency
  object) depends on B (meson introspect --targets of the build dir);
- the top README's layout table has one row per top-level directory with a
  README (the table is read, not listed here), each linking to it, and
  calls none of them "planned";
- (lib/README.md naming every public function is packaging/test/docs_test.py's
  check, beside shmkv(3)'s, from one scan of the headers);
- the cache-name rule's text is written in C only by lib's
  SHMKV_CACHE_NAME_RULE, and the docs that spell it out agree with it;
- every header lib/shmkv.h and shmkv_bpf.h include, directly or through
  another, is in lib/meson.build's install_headers (an uninstalled one
  breaks every client of the installed packages);
- lib's headers read top down: from their #include "..." lines, the graph
  has no cycle and every header includes only headers of a lower level in
  LIB_LEVELS (the public API on top, the format's constants at the bottom);
  a header without a level, or a level for a header that is gone, fails.
usage: docs_test.py SOURCE_ROOT BUILD_ROOT
       docs_test.py --self-test      (the layering check catches a cycle
                                      and an include of a higher header)
"""
import glob
import json
import os
import re
import subprocess
import sys

# the cycle finder of the loader's layering check, one for both
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'loader'))
from layers import find_cycle  # noqa: E402

# lib's headers, top down (FORMAT.md and lib/README.md describe the pieces):
# a header includes only headers of a higher number. The control segment's
# branch (ctl.h, protocol.h, atomic.h) meets the reader's at handle.h.
LIB_LEVELS = {
    'shmkv.h': 0, 'shmkv_bpf.h': 0,
    'shmkv/attach.h': 1, 'shmkv/tools.h': 1, 'shmkv/batch.h': 1, 'shmkv/iter.h': 1,
    'shmkv/get.h': 1,
    'shmkv/open.h': 2, 'shmkv/ctl.h': 2, 'shmkv/delta.h': 2,
    'shmkv/verify.h': 3, 'shmkv/range.h': 3,
    'shmkv/lookup.h': 4,
    'shmkv/bucket.h': 5,
    'shmkv/entry.h': 6,
    'shmkv/types.h': 7,
    'shmkv/handle.h': 8,
    'shmkv/probe.h': 9,
    'shmkv/format.h': 10, 'shmkv/errors.h': 10, 'shmkv/utf8.h': 10, 'shmkv/trace.h': 10,
    'shmkv/protocol.h': 10, 'shmkv/atomic.h': 10,
}


def header_graph(lib):
    """{header: [headers it includes]} for lib's own headers (paths relative
    to lib), from their #include "..." lines."""
    heads = sorted(os.path.relpath(p, lib) for p in
                   glob.glob(os.path.join(lib, '*.h')) + glob.glob(os.path.join(lib, 'shmkv', '*.h')))
    graph = {}
    for h in heads:
        with open(os.path.join(lib, h), encoding='utf-8') as f:
            text = f.read()
        graph[h] = []
        for inc in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text, re.M):
            rel = os.path.normpath(os.path.join(os.path.dirname(h), inc))
            if os.path.exists(os.path.join(lib, rel)):
                graph[h].append(rel)
    return graph


def layering(graph, levels):
    """The violations of the top-down rule in graph, as messages."""
    bad = []
    for h in sorted(graph):
        if h not in levels:
            bad.append(f'lib/{h} has no level in docs_test.py LIB_LEVELS: give it one')
    for h in sorted(levels):
        if h not in graph:
            bad.append(f'docs_test.py LIB_LEVELS names lib/{h}, which does not exist')
    cyc = find_cycle(sorted(graph), {(h, inc): None for h in graph for inc in graph[h]})
    if cyc:
        bad.append('include cycle: ' + ' -> '.join('lib/' + x for x in cyc))
    for h in sorted(graph):
        for inc in graph[h]:
            if h in levels and inc in levels and levels[inc] <= levels[h]:
                bad.append(f'lib/{h} (level {levels[h]}) includes lib/{inc} (level {levels[inc]}): '
                           'a header includes only headers below it')
    return bad


def layering_self_test():
    """The check must catch a cycle, an include of a higher or equal level,
    and a header without a level; and pass a top-down graph."""
    levels = {'a.h': 0, 'b.h': 1, 'c.h': 2}
    cases = {  # name: (graph, levels, what the message says)
        'cycle': ({'a.h': ['b.h'], 'b.h': ['c.h'], 'c.h': ['b.h']}, levels, 'include cycle'),
        'upward': ({'a.h': [], 'b.h': ['a.h'], 'c.h': []}, levels, 'includes lib/a.h (level 0)'),
        'same level': ({'a.h': ['b.h'], 'b.h': ['d.h'], 'c.h': [], 'd.h': []},
                       dict(levels, **{'d.h': 1}), 'includes lib/d.h (level 1)'),
        'no level': ({'a.h': ['b.h'], 'b.h': ['c.h'], 'c.h': [], 'd.h': []}, levels,
                     'lib/d.h has no level'),
        'level of no header': ({'a.h': [], 'b.h': []}, levels, 'names lib/c.h'),
    }
    ok = True
    for name, (g, lv, says) in cases.items():
        if not any(says in m for m in layering(g, lv)):
            print(f'docs: layering self-test {name}: not caught ({says})')
            ok = False
    if layering({'a.h': ['b.h', 'c.h'], 'b.h': ['c.h'], 'c.h': []}, levels):
        print('docs: layering self-test: a top-down graph was refused')
        ok = False
    print('docs: layering self-test ' + ('ok' if ok else 'FAILED'))
    return 0 if ok else 1


if sys.argv[1:] == ['--self-test']:
    sys.exit(layering_self_test())
src, build = sys.argv[1], sys.argv[2]
fails = []
PLUMBING = {'meson.build', 'meson_options.txt', '.gitignore'}
CODE_DIRS = ['lib', 'builder', 'common', 'numa', 'loader', 'shmctl', 'http', 'examples/bpf']


def read(*p):
    with open(os.path.join(*p), encoding='utf-8') as f:
        return f.read()


def fail(msg):
    fails.append(msg)


def named(text, name):
    """name appears as itself (not inside a longer name)."""
    return re.search(r'(?<![\w.-])' + re.escape(name) + r'(?![\w-]|\.\w)', text) is not None


# 1. file lists: the tracked files in a git checkout; else (a source
# package) the tree without build directories and debian/
def tree():
    r = subprocess.run(['git', '-C', src, 'ls-files', '-z'], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout:
        return [f for f in r.stdout.split('\0') if f and os.path.exists(os.path.join(src, f))]
    out = []
    for d, dirs, files in os.walk(src):
        dirs[:] = [x for x in dirs if not x.startswith('.') and not x.startswith('build') and
                   not (d == src and x in ('debian', 'stage')) and
                   not os.path.exists(os.path.join(d, x, 'meson-private'))]
        out += [os.path.relpath(os.path.join(d, f), src) for f in files]
    return out


entries = {}  # directory (relative, '.' top) -> names in it (a subdirectory ends with /)
for f in tree():
    parts = f.split('/')
    for i in range(len(parts)):
        d = '/'.join(parts[:i]) or '.'
        entries.setdefault(d, set()).add(parts[i] + ('/' if i < len(parts) - 1 else ''))
readmes = sorted(os.path.join(src, d) if d != '.' else src
                 for d, names in entries.items() if 'README.md' in names)
if len(readmes) < 15:
    fail(f'found only {len(readmes)} READMEs: the walk is broken')
for d in readmes:
    text = read(d, 'README.md')
    rel = os.path.relpath(d, src)
    for e in sorted(entries[rel]):
        name = e.rstrip('/')
        if name == 'README.md' or name in PLUMBING or name.startswith('.') or name == '__pycache__':
            continue
        ext = os.path.splitext(name)[1]
        # a family of data files may be named by its pattern (`*.img`)
        if not named(text, name) and not (ext and not e.endswith('/') and
                                          re.search(r'`\*' + re.escape(ext) + '`', text)):
            fail(f'{rel}/README.md does not name {e}')

# 2. the dependency graph
targets = json.loads(subprocess.run(['meson', 'introspect', build, '--targets'],
                                    capture_output=True, text=True, check=True).stdout)
deps = {d: set() for d in CODE_DIRS}
seen = set()
for t in targets:
    rel = os.path.relpath(os.path.dirname(t['defined_in']), src)
    if rel not in deps or t['type'] == 'custom':
        continue
    seen.add(rel)
    for s in t['target_sources']:
        for p in s.get('parameters', []):
            if not p.startswith('-I'):
                continue
            inc = os.path.relpath(os.path.realpath(p[2:]), os.path.realpath(src))
            for other in CODE_DIRS:
                if other != rel and (inc == other or inc.startswith(other + '/')):
                    deps[rel].add(other)
if len(seen) < 6 or 'lib' not in deps.get('shmctl', ()):
    fail(f'the meson graph looks wrong (targets in {sorted(seen)}, shmctl -> '
         f'{sorted(deps.get("shmctl", ()))}): the introspection scan is broken')
users = {d: {u for u in CODE_DIRS if d in deps[u]} for d in CODE_DIRS}


def listed(text, label):
    m = re.search(r'^' + re.escape(label) + r' \(ours\): (.*)$', text, re.M)
    if not m:
        return None
    if m.group(1).strip().rstrip('.') == 'nothing':
        return set()
    return {x.strip('`') .rstrip('/') for x in re.findall(r'`?[a-z][a-z/]*/`?', m.group(1))}


# a directory this configuration does not build (examples/bpf without BPF, as
# in the AArch64 cross build) has no edges to compare: its lines, and its name
# in the others' lines, are checked by the builds that have it
unbuilt = set(CODE_DIRS) - seen
for d in CODE_DIRS:
    if d in unbuilt:
        continue
    text = read(src, d, 'README.md')
    for label, want in (('Depends on', deps[d]), ('Used by', users[d])):
        got = listed(text, label)
        if got is not None:
            got -= unbuilt
        if got is None:
            fail(f'{d}/README.md: no "{label} (ours): ..." line (meson says: '
                 f'{", ".join(x + "/" for x in sorted(want)) or "nothing"})')
        elif got != want:
            fail(f'{d}/README.md: "{label} (ours)" says {sorted(got)}, the meson build '
                 f'graph {sorted(want)}')

# 3. the top README's layout table
top = read(src, 'README.md')
table = top.partition('## Layout')[2].partition('\n## ')[0]
rows = {}
for m in re.finditer(r'^\| \[([^\]]+)\]\(([^)]+)\) \| (.*) \|$', table, re.M):
    rows[m.group(1).rstrip('/')] = (m.group(2), m.group(3))
tops = sorted(os.path.relpath(d, src).split('/')[0] for d in readmes if d != src)
for t in sorted(set(tops)):
    if not os.path.exists(os.path.join(src, t, 'README.md')):
        continue
    if t not in rows:
        fail(f'README.md: the layout table has no row for {t}/')
        continue
    link, what = rows[t]
    if not os.path.exists(os.path.join(src, link)):
        fail(f'README.md: the row of {t}/ links to {link}, which does not exist')
    if 'planned' in what.lower():
        fail(f'README.md: the row of {t}/ calls it planned: {what}')
for r in rows:
    if not os.path.isdir(os.path.join(src, r)):
        fail(f'README.md: the layout table lists {r}/, which does not exist')

# 4. the cache-name rule: one text in C, and the docs agree with it
rule = re.search(r'#define SHMKV_CACHE_NAME_RULE "([^"]*)"', read(src, 'lib', 'shmkv', 'ctl.h')).group(1)
for f in glob.glob(os.path.join(src, '**', '*.[ch]'), recursive=True) + \
        glob.glob(os.path.join(src, '**', '*.cc'), recursive=True):
    # python/lib links to lib/: a file is checked once, where it lives
    rel = os.path.relpath(os.path.realpath(f), os.path.realpath(src))
    if rel.startswith('build') or rel.startswith('..') or rel == 'lib/shmkv/ctl.h':
        continue
    if 'A-Z a-z 0-9' in read(f):
        fail(f'{rel}: writes the cache-name rule out; use SHMKV_CACHE_NAME_RULE')
bare = re.sub(r'[`*\\]', '', rule).replace('–', '-')
for doc in ('lib/PROTOCOL.md', 'lib/README.md', 'packaging/man/shmkv.3.scd',
            'packaging/man/shmkv.conf.5.scd'):
    text = re.sub(r'\s+', ' ', re.sub(r'[`*\\]', '', read(src, doc)).replace('–', '-'))
    if bare not in text:
        fail(f'{doc}: does not state the cache-name rule as lib has it: "{bare}"')

# 5. the installed headers: what the public headers include, transitively
lib_build = read(src, 'lib', 'meson.build')
installed = set()
for m in re.finditer(r"install_headers\((.*?)\)", lib_build, re.S):
    sub = re.search(r"subdir\s*:\s*'([^']*)'", m.group(1))
    for h in re.findall(r"'([^']+\.h)'", m.group(1)):
        installed.add(h if sub is None or h.startswith(sub.group(1) + '/') else sub.group(1) + '/' + h)
todo, seen_h = ['shmkv.h', 'shmkv_bpf.h'], set()
while todo:
    h = todo.pop()
    if h in seen_h:
        continue
    seen_h.add(h)
    if h not in installed:
        fail(f'lib/meson.build: {h} is included by the public headers but not installed')
    for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', read(src, 'lib', h), re.M):
        rel = os.path.normpath(os.path.join(os.path.dirname(h), inc))
        if os.path.exists(os.path.join(src, 'lib', rel)):
            todo.append(rel)

# 6. lib's headers read top down
lib_graph = header_graph(os.path.join(src, 'lib'))
if len(lib_graph) < 15:
    fail(f'found only {len(lib_graph)} headers in lib/: the scan is broken')
for msg in layering(lib_graph, LIB_LEVELS):
    fail(msg)

for f in fails:
    print('FAIL', f)
print(f'docs: {len(readmes)} READMEs, '
      f'graph {({k: sorted(v) for k, v in deps.items()})}')
sys.exit(1 if fails else 0)
