#!/usr/bin/env python3
"""packaging_docs: the installed docs name what the code has.

- every public function of lib/ (shmkv_*, from the headers) has a SYNOPSIS
  line and a RETURN VALUE entry in shmkv(3), a line in lib/shmkv.h's table
  of contents and a row in lib/README.md's API reference, and the error
  codes shmkv.h's "Return values" and lib/README.md give each agree;
- every key the loader's config parser accepts is in the example
  loader.conf and in shmkv.conf(5);
- every metric family loader/metrics.c writes is in shmctl(8) and
  loader/README.md;
- every command shmctl's help lists is in shmctl(8) and in the bash
  completion, and the completion completes objects, commands and options
  (bash with bash-completion: a real completion run, not a grep).
usage: docs_test.py SOURCE_ROOT SHMCTL
"""
import glob
import os
import re
import subprocess
import sys

src, shmctl = sys.argv[1], sys.argv[2]
pk = os.path.join(src, 'packaging')
fails = []


def read(*p):
    with open(os.path.join(*p), encoding='utf-8') as f:
        return f.read()


def fail(msg):
    fails.append(msg)


# 1. shmkv(3): every public function
names = set()
for h in [os.path.join(src, 'lib', 'shmkv.h')] + glob.glob(os.path.join(src, 'lib', 'shmkv', '*.h')):
    t = re.sub(r'/\*.*?\*/', '', read(h), flags=re.S)
    for m in re.finditer(r'^static\s+(?:inline\s+|SHMKV__\w+\s+)*[\w\s*]*?\b(shmkv_[a-z0-9_]+)\s*\(', t, re.M):
        if not m.group(1).startswith('shmkv__'):
            names.add(m.group(1))
if len(names) < 40:
    fail(f'found only {len(names)} public functions in lib/: the header scan is broken')
man3 = read(pk, 'man', 'shmkv.3.scd')
syn, _, rest = man3.partition('# DESCRIPTION')
_, _, retval = rest.partition('# RETURN VALUE')
retval = retval.partition('\n# ')[0]
for n in sorted(names):
    if not re.search(r'\b' + n + r'\(', syn):
        fail(f'shmkv.3.scd: {n} has no SYNOPSIS line')
    if '*' + n + '*()' not in retval:
        fail(f'shmkv.3.scd: {n} has no RETURN VALUE entry')
# and lib/README.md (its API reference), which the top README says is whole
lib_readme = read(src, 'lib', 'README.md')
for n in sorted(names):
    if not re.search(r'\b' + n + r'\b', lib_readme):
        fail(f'lib/README.md: {n} is not in its API reference')

# and lib/shmkv.h's table of contents and return values agree with
# lib/README.md's API reference: every public function in both, and for each
# function shmkv.h gives return values for, the same codes in both (a row's
# "as shmkv_x" takes shmkv_x's codes; quoted strings are examples, not codes)
CODE = re.compile(r'(?<![\w-])(?:SHMKV)?(_E[A-Z0-9]+)\b|(?<![\w])(-E[A-Z0-9]+)\b')


def codes(text):
    text = re.sub(r'"[^"]*"', '', text)  # quoted strings are examples, not codes
    out = set()
    for a, b in CODE.findall(text):
        out.add('SHMKV' + a if a else b)
    return out


def refs(text):
    return set(re.findall(r'\bas\s+`?(shmkv_[a-z0-9_]+)', text))


# shmkv.h's return values: "NAME[, NAME...]: text" and its indented lines
h = read(src, 'lib', 'shmkv.h')
contents = h.partition(' * Return values')[0]
retblock = h.partition(' * Return values')[2].partition(' * Lifetime')[0]
hret = {}
cur = None
pending = ''
for line in retblock.split('\n'):
    if re.match(r'^ \*   (?:shmkv_[a-z0-9_]+, )*shmkv_[a-z0-9_]+,$', line):
        pending += line[5:] + ' '
        continue
    if pending and line.startswith(' *   '):
        line = ' *   ' + pending + line[5:]
    pending = ''
    m = re.match(r'^ \*   ((?:shmkv_[a-z0-9_]+(?:, )?)+):(.*)$', line)
    if m:
        cur = [n.strip() for n in m.group(1).split(',') if n.strip()]
        for n in cur: hret[n] = m.group(2)
    elif cur and re.match(r'^ \*\s{6,}', line):
        for n in cur: hret[n] += ' ' + line[2:]
    else:
        cur = None
# lib/README.md's rows: "| `NAME(...)`, ... | text |"
rret = {}
for line in lib_readme.split('\n'):
    if not line.startswith('| `shmkv_'):
        continue
    cells = line.split(' | ')
    first, rest = cells[0], ' | '.join(cells[1:])
    for n in re.findall(r'`(shmkv_[a-z0-9_]+)[(`]', first):
        rret[n] = rest


def resolve(table, n, seen=()):
    if n not in table or n in seen:
        return set()
    c = codes(table[n])
    for ref in refs(table[n]):
        if ref != n:
            c |= resolve(table, ref, seen + (n,))
    return c


for n in sorted(names):
    if not re.search(r'\b' + n + r'\b', contents):
        fail(f'lib/shmkv.h: {n} is not in its Contents')
    if n not in rret:
        fail(f'lib/README.md: {n} has no row in the API reference')
for n in sorted(hret):
    if n not in names:
        fail(f'lib/shmkv.h: Return values name {n}, which is no public function')
        continue
    a, b = resolve(hret, n), resolve(rret, n)
    if a != b:
        fail(f'{n}: shmkv.h returns {sorted(a)}, lib/README.md {sorted(b)}')
for n in sorted(names):
    if n in rret and n not in hret and codes(rret[n]) | refs(rret[n]):
        fail(f'lib/shmkv.h: {n} returns codes (lib/README.md) but is not in its Return values')

# 2. config keys
conf_c = read(src, 'loader', 'config.c')
keys = set(re.findall(r'!strcmp\(k, "([a-z_]+)"\)', conf_c))
if len(keys) < 10:
    fail(f'found only {len(keys)} config keys in loader/config.c: the scan is broken')
example = read(pk, 'loader.conf')
man5 = read(pk, 'man', 'shmkv.conf.5.scd')
for k in sorted(keys):
    if not re.search(r'^;?' + k + r' = ', example, re.M):
        fail(f'loader.conf: key {k} is missing (every key, commented or set)')
    if '*' + k + '* =' not in man5:
        fail(f'shmkv.conf.5.scd: key {k} is not described')
# the example's active keys are what the package needs
for k, v in (('root', '/run/shmkv'), ('spool', '/var/spool/shmkv'), ('group', 'shmkv')):
    if not re.search(r'^' + k + r' = ' + re.escape(v) + r'$', example, re.M):
        fail(f'loader.conf: expected "{k} = {v}" set')

# 3. shmctl commands in shmctl(8) and the completion
man8 = read(pk, 'man', 'shmctl.8.scd')
comp = os.path.join(pk, 'completion', 'shmctl.bash')
comp_text = read(comp)
cmds = {}
for obj in ('image', 'cache', 'hugepages'):
    out = subprocess.run([shmctl, obj, 'help'], capture_output=True, text=True).stdout
    cmds[obj] = sorted(set(re.findall(r'^\s+shmctl ' + obj + r' ([a-z]+)', out, re.M)) - {'help'})
    if len(cmds[obj]) < 2:
        fail(f'shmctl {obj} help lists only {cmds[obj]}: the scan is broken')
    m = re.search(obj + r"_cmds='([^']*)'", comp_text)
    listed = set(m.group(1).split()) if m else set()
    for c in cmds[obj]:
        if not re.search(r'\*' + obj + ' ' + c + r'\*', man8) and \
                not re.search(r'\*' + c + r'\*', man8.partition('# ' + obj.upper())[2]):
            fail(f'shmctl.8.scd: "{obj} {c}" is not described')
        if c not in listed:
            fail(f'completion: {obj} command {c} is not completed')


# the objects shmctl's help lists, each in shmctl(8) and the completion
top = subprocess.run([shmctl, 'help'], capture_output=True, text=True).stdout
m = re.search(r'OBJECT := \{([^}]*)\}', top)
objs = m.group(1).replace('|', ' ').split() if m else []
if len(objs) < 3:
    fail(f'shmctl help lists objects {objs}: the scan is broken')
m = re.search(r"local objects='([^']*)'", comp_text)
comp_objs = m.group(1).split() if m else []
for o in objs:
    if o not in comp_objs:
        fail(f'completion: object {o} is not completed')
    if not re.search(r'\*' + o + r'[* ]', man8):
        fail(f'shmctl.8.scd: object {o} is not described')

# 4. every metric family the loader writes, in shmctl(8) (cache stats
# --prometheus) and loader/README.md (per cache as "_suffix")
lreadme = read(src, 'loader', 'README.md')
fams = sorted(set(re.findall(r'"(shmkv_[a-z_]+)"', read(src, 'loader', 'metrics.c'))))
if len(fams) < 20:
    fail(f'loader/metrics.c: only {len(fams)} metric families found: the scan is broken')
for f in fams:
    short = f[len('shmkv_cache'):] if f.startswith('shmkv_cache_') else None
    if not (re.search(r'\*' + f + r'\*', man8) or
            (short and re.search(r'\*\\' + short + r'\*', man8))):
        fail(f'shmctl.8.scd: metric {f} is not listed under cache stats')
    if not (('`' + f + '`') in lreadme or (short and ('`' + short + '`') in lreadme)):
        fail(f'loader/README.md: metric {f} is not listed')


def complete(line):
    """COMPREPLY for the words of line (the last one is being completed)."""
    bc = '/usr/share/bash-completion/bash_completion'
    words = line.split(' ')
    script = f'''
source {bc} || exit 3
source {comp} || exit 4
COMP_WORDS=({' '.join("'" + w + "'" for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE='{line}'
COMP_POINT={len(line)}
_shmctl
printf '%s\\n' "${{COMPREPLY[@]}}"
'''
    r = subprocess.run(['bash', '--norc', '--noprofile', '-c', script],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f'completion of "{line}": bash exit {r.returncode}: {r.stderr.strip()}')
    return set(r.stdout.split())


if not os.path.exists('/usr/share/bash-completion/bash_completion'):
    fail('bash-completion is not installed (apt-get install bash-completion): '
         'the completion cannot be tested')
else:
    cases = [
        ('shmctl ', {'image', 'cache', 'hugepages', 'doctor', 'bpf', 'help', 'version'}),
        ('shmctl bpf ', {'export', 'status', 'unexport', 'help'}),
        ('shmctl bpf export --m', {'--max-value'}),
        ('shmctl hu', {'hugepages'}),
        ('shmctl do', {'doctor'}),
        ('shmctl doctor ', {'check', 'help'}),
        ('shmctl hugepages ', {'plan', 'reserve', 'help'}),
        ('shmctl hugepages reserve --p', {'--page-size', '--persist', '--pretty',
                                          '--progress'}),
        ('shmctl ca', {'cache'}),
        ('shmctl image ', set(cmds['image']) | {'help'}),
        ('shmctl -j cache r', {'readers', 'reload', 'remove', 'rollback'}),
        ('shmctl ca st', {'status', 'stats'}),
        ('shmctl cache stats --p', {'--prometheus', '--pretty', '--progress'}),
        ('shmctl image build --format ', {'jsonl', 'tsv'}),
        ('shmctl image build --on-duplicate l', {'last'}),
        ('shmctl image build --no', {'--no-dedup'}),
        ('shmctl -', {'-j', '--json', '-p', '--pretty', '-r', '--root', '--progress', '-h',
                      '--help', '-V', '--version'}),
    ]
    for line, want in cases:
        got = complete(line)
        if got != want:
            fail(f'completion of "{line}": got {sorted(got)}, want {sorted(want)}')

for f in fails:
    print('FAIL:', f)
print(f'{len(names)} functions, {len(keys)} config keys, {len(fams)} metric families, '
      f'{sum(len(v) for v in cmds.values())} shmctl commands checked; {len(fails)} failures')
sys.exit(1 if fails else 0)
