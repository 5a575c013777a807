#!/usr/bin/env python3
"""writes_model: the randomized model test of a cache's changes
(loader/README.md, "Writes", "Streams", "Compaction"; lib/PROTOCOL.md,
"Protocol 2"), read by the C, Python, Go and Java readers at once.

A real shmkv-loader (private root, spool and segment directory) serves
cache "model", loaded from a random base image. Then a random sequence of
requests, each through shmctl as a user sends it: `cache set` and `cache
remove` (present and absent keys, values with and without expiry, some
expired), `cache apply` of deltas built by `shmctl image build --delta-of
ORIGIN [--after PREV]` (first of a chain, or the next one), streams
(`cache apply NAME -`, lines sent in bursts, each acknowledged batch one
publish), `cache rollback` (also twice in a row: undone), `cache compact`,
a full `cache load` now and then, and requests that must be refused (a
delta of another image, a delta out of its chain's order: nothing
published). The cache's compaction bound is low (`compact_entries`), so
the loader also compacts by itself, between requests; so is its fold bound
(`fold_entries`, `fold_ratio`): a change goes into the top overlay, which
the loader folds into the lower one by itself every few changes.

The model: every generation's contents (a dict), with the loader's rules
for what each request publishes: a change applies to the current
contents; `rollback` swaps the current and the rollback generation (its
contents, its origin image and its chain position); a compaction keeps the
contents; a full load replaces them. Each generation also has the keys of
its lower and its top overlay: a change goes into the top (into the lower
while there is none); a fold merges the top into the lower and keeps the
contents and the rollback generation (the one before the last change). A
compaction merges a generation (its snapshot) off the loader's worker
while changes go on: what it publishes keeps the contents then current,
its one overlay the keys whose records changed since the snapshot (the
catch-up). A generation that no reply named is an automatic compaction
(the loader's log names it and the generation it merged, whose overlay
was past the compaction bound), else a fold (its top past the fold bound);
checked at the end against the loader's compaction and fold counts. Each reply's figures are
checked too (`changes`: the overlay's records; `records`: the delta's or
the batch's; `rollback_generation`).

After every publish each reader (model_reader.c's protocol) is told the
generation: it refreshes until it has that one or a later one, reads every
key of the pool (2000 keys) in one pinned generation by get, batch get and
expiry, and replies the generation it read with a CRC-32 of its answers;
the driver compares it with the model of that generation (a generation a
stream published but not yet acknowledged is waited for). Every few
publishes, and at the end, each reader also iterates its generation: the
live entries, count and content. A mismatch asks the reader for its
answers and names the wrong keys. Any wrong answer fails the test; the
seed to replay it is printed.

usage: writes_model.py --shmctl SHMCTL --loader SHMKV_LOADER
         --reader NAME=COMMAND...  (COMMAND gets ROOT CACHE appended)
         [--publishes N] [--seed S] [--keys N] [--fold-entries N]
         [--fold-ratio R] [--keep]
Environment: SHMKV_MODEL_PUBLISHES (default 600), SHMKV_MODEL_SEED,
SHMKV_TEST_SLOW (a factor for every deadline).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Iterable

CACHE = 'model'
SLOW = max(1.0, float(os.environ.get('SHMKV_TEST_SLOW') or 1))
DEADLINE = 120.0 * SLOW  # seconds: any wait for an event
COMPACT_ENTRIES = 300    # the cache's compaction bound (records in the overlay)
FOLD = (5, 0.5)          # its fold bound: fold_entries, fold_ratio (--fold-entries, --fold-ratio)
NOW = int(time.time())
FAR = (4_000_000_000, 4_294_967_295)  # expiries far ahead (2096..2106): live
PAST = (1, 1_000_000_000)             # expiries long gone: absent
MAX_FAILS = 10


class Failed(Exception):
    """The run cannot go on (a tool failed, a reader died)."""


fails: list[str] = []


def fail(msg: str) -> None:
    print('FAIL:', msg, flush=True)
    fails.append(msg)
    if len(fails) >= MAX_FAILS:
        raise Failed(f'{MAX_FAILS} failures: stopping')


# ---------------------------------------------------------------- the model

Entry = tuple[str, int]  # value, expiry (0: none)


def live(e: Entry | None) -> bool:
    return e is not None and (e[1] == 0 or e[1] > NOW)


def field_of(b: bytes) -> bytes:
    return b'%d:' % len(b) + b


@dataclass(frozen=True)
class State:
    """What one generation serves, and what the loader keeps with it: its
    records (removed keys gone, expired ones kept: absent to reads), the
    keys its overlays hold (every change since its base), the image its
    base was loaded from (deltas are built against it), the last delta
    applied (a chain's next one follows it), and the keys of its lower and
    its top overlay (None: no such overlay)."""
    d: dict[str, Entry]
    ov: frozenset[str]
    origin: str
    chain: str | None
    cache: dict[str, Any] = field(default_factory=dict, compare=False)
    lower: frozenset[str] | None = None
    top: frozenset[str] | None = None

    def changed(self, changes: Iterable[tuple[str, Entry | None]]) -> 'State':
        d = dict(self.d)
        keys = set(self.ov)
        new: set[str] = set()
        for k, e in changes:
            new.add(k)
            if e is None:
                d.pop(k, None)
            else:
                d[k] = e
        keys |= new
        # into the top; the first overlay is the lower one
        if self.lower is None:
            return State(d, frozenset(keys), self.origin, self.chain, lower=frozenset(new))
        return State(d, frozenset(keys), self.origin, self.chain, lower=self.lower,
                     top=(self.top or frozenset()) | new)

    def fold_due(self) -> bool:
        """The loader's rule (loader/README.md, "Writes"): the top holds
        max(fold_entries, fold_ratio x the lower's records) records."""
        if self.top is None or self.lower is None:
            return False
        return len(self.top) >= FOLD[0] and len(self.top) >= FOLD[1] * len(self.lower)

    def folded(self) -> 'State':
        assert self.lower is not None and self.top is not None
        return dataclasses.replace(self, lower=self.lower | self.top, top=None)

    def check_digest(self, pool: list[str]) -> tuple[str, int]:
        """The CRC-32 of a check's answers over pool (model_reader.c), and
        how many keys are present."""
        if 'check' not in self.cache:
            parts, n = [], 0
            for k in pool:
                e = self.d.get(k)
                if live(e):
                    assert e is not None
                    parts.append(field_of(e[0].encode()) + b',%d\n' % e[1])
                    n += 1
                else:
                    parts.append(b'-\n')
            self.cache['check'] = ('%08x' % zlib.crc32(b''.join(parts)), n)
        return self.cache['check']

    def entries(self) -> list[tuple[bytes, bytes, int]]:
        return sorted((k.encode(), e[0].encode(), e[1]) for k, e in self.d.items() if live(e))

    def iter_digest(self) -> tuple[str, int]:
        if 'iter' not in self.cache:
            es = self.entries()
            b = b''.join(field_of(k) + field_of(v) + b',%d\n' % x for k, v, x in es)
            self.cache['iter'] = ('%08x' % zlib.crc32(b), len(es))
        return self.cache['iter']


class Model:
    """The generations the loader published, as the model has them."""

    def __init__(self, gen: int, base: State, log: str) -> None:
        self.log = log     # the loader's log: which generations compactions published
        self.cur = base
        self.rb: State | None = None
        self.known = gen
        self.gens: dict[int, State] = {gen: base}
        self.auto = 0      # compactions inferred (no request named them)
        self.compacts = 0  # compactions by request that published
        self.caught_up = 0  # compactions that published changes made while they merged
        self.folds = 0     # folds inferred (no request names one)

    def due(self) -> bool:
        return len(self.cur.ov) >= COMPACT_ENTRIES

    def unnamed_due(self) -> bool:
        """A generation no request names is due: a compaction or a fold."""
        return self.due() or self.cur.fold_due()

    def publish(self, gen: int, new: State, what: str) -> None:
        self.fill(gen)
        if gen != self.known + 1:
            fail(f'{what}: generation {gen}, want {self.known + 1}')
            raise Failed('the model lost track of the generations')
        self.rb, self.cur = self.cur, new
        self.known = gen
        self.gens[gen] = new
        for g in [g for g in self.gens if g < gen - 64]:
            del self.gens[g]

    def compacted(self, snap: State) -> State:
        """The current contents over a compaction of snap: its overlay the
        catch-up, every key whose record differs from snap's (catchup.c)."""
        cur = self.cur
        catch = frozenset(k for k in cur.ov if k not in snap.ov or snap.d.get(k) != cur.d.get(k))
        return State(cur.d, catch, cur.origin, cur.chain, cur.cache,
                     lower=catch if catch else None)

    def unnamed(self, gen: int) -> int | None:
        """What published gen, which no reply named: the generation a
        compaction merged, or None for a fold, as the loader's log says
        (its line comes right after the publish: waited for)."""
        end = time.monotonic() + DEADLINE
        while True:
            with open(self.log, 'rb') as f:
                text = f.read().decode('utf-8', 'replace')
            m = re.search(rf'^compacted cache={CACHE} gen={gen} merged_gen=(\d+) ', text, re.M)
            if m:
                return int(m.group(1))
            if re.search(rf'^folded cache={CACHE} gen={gen} ', text, re.M):
                return None
            if time.monotonic() > end:
                fail(f'generation {gen} was published by no request, and the loader logged '
                     'neither a compaction nor a fold of it')
                raise Failed('the model lost track of the generations')
            time.sleep(0.01)

    def snapshot(self, gen: int, what: str) -> State:
        snap = self.gens.get(gen)
        if snap is None:
            fail(f'{what}: merged generation {gen}, which the model no longer keeps')
            raise Failed('the model lost track of the generations')
        return snap

    def fill(self, gen: int) -> None:
        """Generations before gen that no reply named: compactions the
        loader made by itself, each of the contents then current, else
        folds (the same contents; the rollback generation stays)."""
        while self.known + 1 < gen:
            g = self.known + 1
            merged = self.unnamed(g)
            if merged is not None:
                snap = self.snapshot(merged, f'generation {g}')
                if len(snap.ov) < COMPACT_ENTRIES:
                    fail(f'generation {g}: a compaction by no request of generation {merged}, '
                         f'whose overlay ({len(snap.ov)} records) was within the bound')
                self.rb, self.cur = self.cur, self.compacted(snap)
                self.caught_up += merged != self.known
                self.auto += 1
            elif self.cur.fold_due():
                self.cur = self.cur.folded()
                self.folds += 1
            else:
                top = len(self.cur.top) if self.cur.top is not None else 'no'
                fail(f'generation {g} was published by no request, and neither a compaction '
                     f'(overlay {len(self.cur.ov)} records, bound {COMPACT_ENTRIES}) nor a fold '
                     f'({top} top records, bound {FOLD}) was due')
                raise Failed('the model lost track of the generations')
            self.known = g
            self.gens[g] = self.cur

    def rollback(self, gen: int, rb_gen: int) -> None:
        self.fill(gen)
        if self.rb is None:
            fail('rollback succeeded where the model has no rollback generation')
            raise Failed('the model lost track')
        if rb_gen != self.known:
            fail(f'rollback: rollback_generation {rb_gen}, want {self.known}')
        back = self.rb
        self.rb = self.cur
        self.cur = back
        if gen != self.known + 1:
            fail(f'rollback: generation {gen}, want {self.known + 1}')
            raise Failed('the model lost track')
        self.known = gen
        self.gens[gen] = back


# ------------------------------------------------------------ random input

ASCII = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;_-+=/()[]{}<>!?@#$%^&*~|'
ODD = ['é', 'ß', 'ж', 'ключ', '键', 'λ', '€', '😀', '🚀', '\t', '\n', '"', '\\', "'", '\u2028', '\x7f', '\x01']


def rand_text(rng: random.Random, n: int) -> str:
    if rng.random() < 0.8:
        return ''.join(rng.choices(ASCII, k=n))
    return ''.join(rng.choice(ODD) if rng.random() < 0.15 else rng.choice(ASCII) for _ in range(n))


def rand_value(rng: random.Random, big: bool = False) -> str:
    r = rng.random()
    if r < 0.04:
        n = 0
    elif r < 0.70:
        n = rng.randint(1, 40)
    elif r < 0.94:
        n = rng.randint(41, 300)
    elif big:
        n = rng.randint(2000, 40000)
    else:
        n = rng.randint(301, 1500)
    v = rand_text(rng, n)
    # a shmctl argument, so never one of its options
    return 'x' + v if v.startswith(('--type', '--expires')) else v


def rand_expiry(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.70:
        return 0
    if r < 0.95:
        return rng.randint(*FAR)
    return rng.randint(*PAST)


def make_pool(rng: random.Random, n: int) -> list[str]:
    pool: list[str] = []
    seen: set[str] = set()
    while len(pool) < n:
        i = len(pool)
        r = rng.random()
        if r < 0.9:
            k = f'k{i}:{rand_text(rng, rng.randint(0, 12))}'
        elif r < 0.97:
            k = f'{rng.choice(["ключ", "键", "λ", "😀", "é"])}{i}{rand_text(rng, rng.randint(0, 8))}'
        else:
            k = f'long{i}:' + rand_text(rng, rng.randint(100, 400))
        k = k.replace('\n', ' ').replace('\t', ' ')
        if k not in seen and not k.startswith('-'):
            seen.add(k)
            pool.append(k)
    return pool


def record(k: str, e: Entry | None, ascii_only: bool) -> str:
    """One JSONL record: an upsert or a removal."""
    if e is None:
        return json.dumps({'key': k, 'remove': True}, ensure_ascii=ascii_only)
    r: dict[str, Any] = {'key': k, 'value': e[0]}
    if e[1]:
        r['expires'] = e[1]
    return json.dumps(r, ensure_ascii=ascii_only)


# ---------------------------------------------------------------- processes

class Reader:
    """One reader process (model_reader.c's protocol) and its reply lines."""

    def __init__(self, name: str, cmd: list[str], log: IO[bytes]) -> None:
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.decode('utf-8', 'replace').rstrip('\n'))
        self.lines.put(None)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b'\n')
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise Failed(f'reader {self.name} exited ({self.proc.poll()})') from None

    def recv(self, seconds: float) -> str:
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            raise Failed(f'reader {self.name}: no reply within {seconds:.0f} s') from None
        if line is None:
            raise Failed(f'reader {self.name} exited ({self.proc.wait()}); its stderr is in the log')
        return line

    def close(self) -> None:
        try:
            self.send('quit')
        except Failed:
            pass
        try:
            self.proc.wait(timeout=30 * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Run:
    """The loader, shmctl, the readers, the model, and the requests."""

    def __init__(self, args: argparse.Namespace, tmp: str) -> None:
        self.args = args
        self.tmp = tmp
        self.rng = random.Random(args.seed)
        self.root = os.path.join(tmp, 'root')
        self.shm = tempfile.mkdtemp(prefix='shmkv-model-', dir='/dev/shm')
        for d in (tmp, self.shm):
            os.chmod(d, 0o755)
        os.mkdir(self.root, 0o755)
        os.mkdir(os.path.join(tmp, 'spool'), 0o755)
        self.log = open(os.path.join(tmp, 'log'), 'wb')
        self.loader: subprocess.Popen[bytes] | None = None
        self.readers: list[Reader] = []
        self.pool = make_pool(self.rng, args.keys)
        self.n_files = 0
        self.applied: list[tuple[str, str]] = []  # every delta applied, and its origin
        self.counts: dict[str, int] = {}
        self.changes = 0               # records sent as changes (set, remove, stream lines, delta records)
        self.checks = 0
        self.iters = 0
        self.model: Model | None = None
        self.images: dict[str, dict[str, Entry]] = {}  # each image built: its records
        self.stream_acks: queue.Queue[str | None] | None = None
        self.stream_lines: list[tuple[str, Entry | None] | None] = []
        self.stream_last = 0
        self.stream_sent = 0

    # -- tools

    def path(self, ext: str) -> str:
        self.n_files += 1
        return os.path.join(self.tmp, f'f{self.n_files}.{ext}')

    def shmctl(self, *args: str, ok: bool = True) -> tuple[int, Any]:
        """shmctl -j -r ROOT ARGS: (exit code, its JSON reply or None)."""
        cmd = [self.args.shmctl, '-j', '-r', self.root] + list(args)
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            raise Failed(f'shmctl {" ".join(args[:3])}: still running after {DEADLINE:.0f} s') from None
        out = r.stdout.decode('utf-8', 'replace')
        try:
            j = json.loads(out) if out.strip() else None
        except ValueError:
            j = None
        if ok and r.returncode != 0:
            raise Failed(f'shmctl {" ".join(a[:60] for a in args[:4])}: exit {r.returncode}: {out[:500]} '
                         f'{r.stderr.decode("utf-8", "replace")[:500]}')
        return r.returncode, j

    def write_jsonl(self, records: list[str]) -> str:
        p = self.path('jsonl')
        with open(p, 'w', encoding='utf-8') as f:
            f.write(''.join(r + '\n' for r in records))
        return p

    def build_image(self, d: dict[str, Entry]) -> str:
        items = list(d.items())
        self.rng.shuffle(items)
        src = self.write_jsonl([record(k, e, self.rng.random() < 0.5) for k, e in items])
        out = self.path('shmkv')
        self.shmctl('image', 'build', '-o', out, '--name', CACHE, src)
        os.unlink(src)
        self.images[out] = d
        return out

    def random_dict(self, n: int) -> dict[str, Entry]:
        return {k: (rand_value(self.rng, big=True), rand_expiry(self.rng))
                for k in self.rng.sample(self.pool, n)}

    # -- the loader and the readers

    def start(self) -> None:
        conf = os.path.join(self.tmp, 'loader.conf')
        with open(conf, 'w') as f:
            f.write('[loader]\nstream_interval = 5ms\n'
                    f'[cache {CACHE}]\ncompact_entries = {COMPACT_ENTRIES}\ncompact_ratio = 0\n'
                    f'fold_entries = {FOLD[0]}\nfold_ratio = {FOLD[1]}\n')
        self.loader = subprocess.Popen(
            [self.args.loader, '--config', conf, '--root', self.root, '--spool',
             os.path.join(self.tmp, 'spool'), '--shm-dir', self.shm, '--memory', 'shm',
             '--foreground'], stderr=self.log)
        end = time.monotonic() + DEADLINE
        while not os.path.exists(os.path.join(self.root, 'control.sock')):
            if self.loader.poll() is not None:
                raise Failed(f'the loader exited {self.loader.returncode} (log: {self.log.name})')
            if time.monotonic() > end:
                raise Failed('the loader did not open its control socket')
            time.sleep(0.02)
        # an image no delta of the cache's is built against (refused deltas)
        self.foreign = self.build_image({'foreign': ('not the cache', 0)})
        base = self.build_image(self.random_dict(len(self.pool) // 2))
        _, j = self.shmctl('cache', 'load', CACHE, base)
        self.model = Model(j['generation'], State(self.images[base], frozenset(), base, None),
                           self.log.name)
        self.count('load')
        for spec in self.args.reader:
            name, _, cmd = spec.partition('=')
            self.readers.append(Reader(name, shlex.split(cmd) + [self.root, CACHE], self.log))
        keys = 'keys ' + ' '.join(k.encode().hex() for k in self.pool)
        for r in self.readers:
            r.send(keys)
        for r in self.readers:
            got = r.recv(DEADLINE)
            if got != f'ok {len(self.pool)}':
                raise Failed(f'reader {r.name}: keys: {got[:300]}')

    def stop(self) -> None:
        for r in self.readers:
            r.close()
        if self.loader is not None:
            self.loader.send_signal(signal.SIGTERM)
            try:
                rc = self.loader.wait(timeout=60 * SLOW)
                if rc != 0:
                    fail(f'the loader exited {rc} after SIGTERM')
            except subprocess.TimeoutExpired:
                self.loader.kill()
                self.loader.wait()
                fail('the loader did not stop within 60 s of SIGTERM')
        shutil.rmtree(self.shm, ignore_errors=True)
        self.log.close()

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # -- checks

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    def resolve(self, gen: int) -> State | None:
        """The model of generation gen, waiting for a stream's
        acknowledgements while they may name it; an automatic compaction
        when nothing else will."""
        # lines sent and not yet acknowledged will be: their batch may be it
        while gen > self.m.known and self.stream_acks is not None and self.stream_last < self.stream_sent:
            if not self.take_ack(DEADLINE):
                break
        if gen > self.m.known:  # published by no request: a compaction or a fold
            self.m.fill(gen + 1)
        return self.m.gens.get(gen)

    def check(self, gen: int, iterate: bool) -> None:
        """Every reader at generation gen or later: its answers (and
        iteration) against the model of the generation it read."""
        ms = int(DEADLINE * 1000)
        for r in self.readers:
            r.send(f'check {gen} {ms}')
        replies = [(r, r.recv(DEADLINE + 60)) for r in self.readers]
        self.checks += 1
        for r, got in replies:
            w = got.split()
            if len(w) != 4 or w[0] != 'ok':
                fail(f'reader {r.name}: check {gen}: {got[:500]}')
                continue
            g = int(w[1])
            if g < gen:
                fail(f'reader {r.name}: check {gen}: read generation {g}')
                continue
            st = self.resolve(g)
            if st is None:
                fail(f'reader {r.name}: read generation {g}, which the loader did not publish '
                     f'(the model knows up to {self.m.known})')
                continue
            want = st.check_digest(self.pool)
            if (w[2], int(w[3])) != want:
                self.explain(r, g, st)
        if not iterate:
            return
        self.iters += 1
        for r in self.readers:
            r.send('iter')
        for r in self.readers:
            got = r.recv(DEADLINE)
            w = got.split()
            if len(w) != 4 or w[0] != 'ok':
                fail(f'reader {r.name}: iter: {got[:500]}')
                continue
            st = self.m.gens.get(int(w[1]))
            if st is None:  # its check failed
                continue
            if (w[2], int(w[3])) != st.iter_digest():
                self.explain_iter(r, int(w[1]), st)

    def explain(self, r: Reader, gen: int, st: State) -> None:
        """A check that differs from the model: the keys it answered wrong."""
        r.send('dump')
        toks = r.recv(DEADLINE).split()[2:]
        wrong = []
        for k, t in zip(self.pool, toks):
            e = st.d.get(k)
            want = f'{e[0].encode().hex()},{e[1]}' if live(e) and e is not None else '-'
            if t != want:
                wrong.append(f'{k[:40]!r}: {self.show(t)}, model {self.show(want)}')
        fail(f'reader {r.name}, generation {gen}: {len(wrong)} keys wrong'
             f'{"" if len(toks) == len(self.pool) else f" ({len(toks)} answers)"}: ' + '; '.join(wrong[:5]))

    def explain_iter(self, r: Reader, gen: int, st: State) -> None:
        r.send('dumpiter')
        toks = r.recv(DEADLINE).split()[2:]
        got = {}
        for t in toks:
            k, v, x = t.split(',')
            got[bytes.fromhex(k)] = (bytes.fromhex(v), int(x))
        want = {k: (v, x) for k, v, x in st.entries()}
        extra = [k for k in got if k not in want]
        missing = [k for k in want if k not in got]
        differ = [k for k in got if k in want and got[k] != want[k]]
        fail(f'reader {r.name}, generation {gen}: iteration yields {len(toks)} entries, model '
             f'{len(want)}: {len(extra)} extra {extra[:3]}, {len(missing)} missing {missing[:3]}, '
             f'{len(differ)} differ {differ[:3]}')

    @staticmethod
    def show(tok: str) -> str:
        if tok == '-':
            return 'absent'
        v, _, x = tok.partition(',')
        s = bytes.fromhex(v).decode('utf-8', 'replace')
        return f'{s[:30]!r}{"..." if len(s) > 30 else ""} (expires {x})'

    # -- requests

    def after_publish(self) -> None:
        self.check(self.m.known, iterate=self.rng.random() < self.args.iterate)

    def op_set(self) -> None:
        k = self.rng.choice(self.pool)
        e = (rand_value(self.rng), rand_expiry(self.rng))
        args = ['cache', 'set', CACHE, k, e[0]] + (['--expires', str(e[1])] if e[1] else [])
        _, j = self.shmctl(*args)
        self.m.fill(j['generation'])
        new = self.m.cur.changed([(k, e)])
        self.expect(j, 'set', changes=len(new.ov), records=1)
        self.m.publish(j['generation'], new, 'set')
        self.changes += 1

    def op_remove(self) -> None:
        k = self.rng.choice(self.pool)
        _, j = self.shmctl('cache', 'remove', CACHE, k)
        self.m.fill(j['generation'])
        new = self.m.cur.changed([(k, None)])
        self.expect(j, 'remove', changes=len(new.ov), records=1)
        self.m.publish(j['generation'], new, 'remove')
        self.changes += 1

    def expect(self, j: Any, what: str, **want: int) -> None:
        for f, v in want.items():
            if j.get(f) != v:
                fail(f'{what}: reply {f} {j.get(f)}, want {v} ({json.dumps(j)[:300]})')

    def delta_records(self) -> tuple[list[tuple[str, Entry | None]], list[str], bool]:
        """A delta's changes (in order; a key may come twice), its JSONL."""
        n = self.rng.choice([1, 2, 5, 20, 50, 120, 250])
        changes: list[tuple[str, Entry | None]] = []
        for _ in range(n):
            k = self.rng.choice(self.pool)
            e = None if self.rng.random() < 0.25 else (rand_value(self.rng, big=True), rand_expiry(self.rng))
            changes.append((k, e))
        dup = len({k for k, _ in changes}) != len(changes)
        ascii_only = self.rng.random() < 0.5
        return changes, [record(k, e, ascii_only) for k, e in changes], dup

    def build_delta(self, origin: str, after: str | None, lines: list[str], dup: bool) -> str:
        out = self.path('delta')
        args = ['image', 'build', '--delta-of', origin, '-o', out]
        if after:
            args += ['--after', after]
        if dup:
            args += ['--on-duplicate', 'last']
        src = self.write_jsonl(lines)
        self.shmctl(*args, src)
        os.unlink(src)
        return out

    def tidy(self) -> None:
        """Removes the images and deltas no later request uses (a long soak
        would fill the disk): only the current and the rollback
        generation's origin and chain, and the last deltas applied."""
        states = [s for s in (self.m.cur, self.m.rb) if s is not None]
        self.applied = self.applied[-50:]
        keep = {self.foreign} | {s.origin for s in states} | {s.chain for s in states if s.chain}
        keep |= {d for d, _ in self.applied}
        for f in os.listdir(self.tmp):
            p = os.path.join(self.tmp, f)
            if f.endswith(('.shmkv', '.delta')) and p not in keep:
                os.unlink(p)
                self.images.pop(p, None)

    def op_apply(self) -> None:
        cur = self.m.cur
        after = cur.chain if cur.chain and self.rng.random() < 0.5 else None
        changes, lines, dup = self.delta_records()
        delta = self.build_delta(cur.origin, after, lines, dup)
        _, j = self.shmctl('cache', 'apply', CACHE, delta)
        self.m.fill(j['generation'])  # a compaction keeps the origin and the chain
        new = dataclasses.replace(self.m.cur.changed(changes), chain=delta)
        self.expect(j, 'apply', records=len({k for k, _ in changes}), changes=len(new.ov))
        self.m.publish(j['generation'], new, 'apply')
        self.applied.append((delta, cur.origin))
        self.count('apply after' if after else 'apply')
        self.changes += len(changes)

    def op_refused(self) -> None:
        """A delta the loader must refuse: of another image, or following a
        delta that is not the last one applied. Nothing is published."""
        cur = self.m.cur
        changes, lines, dup = self.delta_records()
        # a delta of the same origin that is not the last applied: one after it is refused
        others = [d for d, o in self.applied[-50:] if o == cur.origin and d != cur.chain]
        if self.rng.random() < 0.5 or not others:
            delta, why = self.build_delta(self.foreign, None, lines, dup), 'of another image'
            said = "not the cache's base"
        else:
            prev = self.rng.choice(others)
            delta = self.build_delta(cur.origin, prev, lines, dup)
            why, said = 'out of its chain', 'apply the chain in order'
            if cur.chain and open(prev, 'rb').read() == open(cur.chain, 'rb').read():
                return  # the same bytes as the last one applied: it would apply
        rc, j = self.shmctl('cache', 'apply', CACHE, delta, ok=False)
        # (shmctl -j passes on the loader's message, not its code)
        msg = (j or {}).get('error', '')
        if rc != 2 or delta not in msg or said not in msg:
            fail(f'a delta {why}: exit {rc}, {json.dumps(j)[:300]}; want exit 2, "{said}"')
        self.count('refused')
        self.check(self.m.known, iterate=False)  # nothing new

    def op_rollback(self) -> None:
        rc, j = self.shmctl('cache', 'rollback', CACHE, ok=self.m.rb is not None)
        if self.m.rb is None:
            if rc == 0:
                fail(f'rollback without a rollback generation: {json.dumps(j)[:300]}')
            return
        self.m.rollback(j['generation'], j['rollback_generation'])
        self.count('rollback')

    def op_compact(self) -> None:
        _, j = self.shmctl('cache', 'compact', CACHE)
        if not j.get('compacted'):
            self.m.fill(j['generation'] + 1)  # what the loader compacted by itself meanwhile
            if self.m.cur.ov or j['generation'] != self.m.known:
                fail(f'compact: nothing compacted, generation {j["generation"]}, while the model '
                     f'has {len(self.m.cur.ov)} changes at {self.m.known}')
            self.count('compact (nothing)')
            self.check(self.m.known, iterate=False)
            return
        self.m.fill(j['generation'])
        # the one running may have merged an earlier generation (one the
        # loader started by itself, which this request waited for)
        snap = self.m.snapshot(j.get('merged_generation', -1), 'compact')
        self.expect(j, 'compact', records=len(snap.ov))
        new = self.m.compacted(snap)
        self.m.caught_up += snap is not self.m.gens.get(self.m.known)
        self.expect(j, 'compact', catch_up=len(new.ov))
        self.m.publish(j['generation'], new, 'compact')
        self.m.compacts += 1
        self.count('compact')

    def op_load(self) -> None:
        r = self.rng.random()
        if r < 0.5:  # a new image of the contents now, changed a little
            d = {k: e for k, e in self.m.cur.d.items() if self.rng.random() < 0.9}
            d.update(self.random_dict(self.rng.randint(0, 100)))
        else:
            d = self.random_dict(self.rng.randint(0, len(self.pool)))
        image = self.build_image(d)
        _, j = self.shmctl('cache', 'load', CACHE, image)
        self.m.publish(j['generation'], State(d, frozenset(), image, None), 'load')
        self.count('load')

    # -- streams

    def op_stream(self) -> None:
        """cache apply NAME -: lines in bursts; each acknowledged batch is
        one publish, checked as it comes."""
        n = self.rng.choice([5, 30, 100, 300])
        ascii_only = self.rng.random() < 0.5
        self.stream_lines = [None]  # lines from 1
        text = []
        for _ in range(n):
            if self.rng.random() < 0.03:
                self.stream_lines.append(None)  # a blank line counts and changes nothing
                text.append('')
                continue
            k = self.rng.choice(self.pool)
            e = None if self.rng.random() < 0.25 else (rand_value(self.rng, big=True), rand_expiry(self.rng))
            self.stream_lines.append((k, e))
            text.append(record(k, e, ascii_only))
        self.stream_last = 0
        self.stream_sent = 0
        proc = subprocess.Popen([self.args.shmctl, '-j', '-r', self.root, 'cache', 'apply', CACHE, '-'],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        acks: queue.Queue[str | None] = queue.Queue()
        self.stream_acks = acks

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                acks.put(line.decode('utf-8', 'replace'))
            acks.put(None)
        threading.Thread(target=pump, daemon=True).start()
        assert proc.stdin is not None
        i = 0
        try:
            while i < n:
                k = self.rng.randint(1, 40)
                proc.stdin.write(''.join(t + '\n' for t in text[i:i + k]).encode())
                proc.stdin.flush()
                i = min(n, i + k)
                self.stream_sent = i
                before = self.m.known
                while self.take_ack(0):
                    pass
                if self.m.known != before:
                    self.after_publish()
                if self.rng.random() < 0.3:
                    time.sleep(self.rng.choice([0.002, 0.01, 0.03]))
            proc.stdin.close()
            while self.stream_last < n:
                before = self.m.known
                if not self.take_ack(DEADLINE):
                    break
                while self.take_ack(0):
                    pass
                if self.m.known != before:
                    self.after_publish()
            rc = proc.wait(timeout=DEADLINE)
        except (BrokenPipeError, subprocess.TimeoutExpired) as e:
            proc.kill()
            proc.wait()
            raise Failed(f'stream: {e}; shmctl said {proc.stderr.read()[:500]!r}') from None
        finally:
            self.stream_acks = None
        err = proc.stderr.read().decode('utf-8', 'replace') if proc.stderr else ''
        if rc != 0 or self.stream_last != n:
            fail(f'stream of {n} lines: shmctl exit {rc}, acknowledged through line {self.stream_last}: {err[:500]}')
        self.count('stream')

    def take_ack(self, seconds: float) -> bool:
        """One acknowledgement of the stream, into the model; False when none
        came within seconds (or the stream ended)."""
        assert self.stream_acks is not None
        try:
            line = self.stream_acks.get(timeout=seconds) if seconds else self.stream_acks.get_nowait()
        except queue.Empty:
            return False
        if line is None:
            self.stream_acks.put(None)  # stays ended
            return False
        j = json.loads(line)
        first, last = j.get('first_line'), j.get('last_line')
        if not j.get('ok') or first != self.stream_last + 1 or last < first or last >= len(self.stream_lines):
            fail(f'stream: acknowledgement {line.strip()[:300]} after line {self.stream_last}')
            raise Failed('the stream went wrong')
        batch = [c for c in self.stream_lines[first:last + 1] if c is not None]
        self.stream_last = last
        if not batch:  # blank lines: acknowledged, nothing published
            self.m.fill(j['generation'] + 1)
            self.expect(j, 'stream batch of blank lines', generation=self.m.known, records=0,
                        lines=last - first + 1)
            self.count('stream batch (blank)')
            return True
        self.m.fill(j['generation'])
        new = self.m.cur.changed(batch)
        self.expect(j, 'stream batch', lines=last - first + 1, changes=len(new.ov),
                    records=len({k for k, _ in batch}))
        self.m.publish(j['generation'], new, f'stream lines {first}-{last}')
        self.changes += len(batch)
        self.count('stream batch')
        return True

    # -- the run

    OPS = [('set', 30), ('remove', 12), ('apply', 16), ('stream', 6), ('rollback', 9),
           ('compact', 4), ('load', 2), ('refused', 3)]

    def run(self) -> None:
        self.start()
        self.check(self.m.known, iterate=True)
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        ops = 0
        while self.m.known < self.args.publishes:
            op = self.rng.choices(names, weights)[0]
            # a second rollback now and then: it undoes the first
            for _ in range(2 if op == 'rollback' and self.rng.random() < 0.3 else 1):
                before = self.m.known
                getattr(self, 'op_' + op)()
                # (a stream checks each batch, a refused delta and an empty
                # compaction check that nothing was published)
                if op != 'stream' and self.m.known != before:
                    self.after_publish()
            if op in ('set', 'remove'):
                self.count(op)
            ops += 1
            if ops % 50 == 0:
                self.tidy()
        self.check(self.m.known, iterate=True)
        self.final_status()

    def final_status(self) -> None:
        """The loader agrees on the generation, the compactions and the
        overlay (a compaction still pending is waited for)."""
        end = time.monotonic() + DEADLINE
        while True:
            _, s = self.shmctl('cache', 'status', CACHE)
            gen, count = s.get('generation'), (s.get('compaction') or {}).get('count')
            if (s.get('compaction') or {}).get('running') and time.monotonic() < end:
                time.sleep(0.05)  # its publish comes
                continue
            if gen == self.m.known + 1:
                self.m.fill(gen + 1)
                self.check(self.m.known, iterate=True)
                continue
            if gen == self.m.known or time.monotonic() > end:
                break
            time.sleep(0.05)
        if gen != self.m.known:
            fail(f'status: generation {gen}, the model {self.m.known}')
        if count != self.m.compacts + self.m.auto:
            fail(f'status: {count} compactions, the model {self.m.compacts} by request and '
                 f'{self.m.auto} by the bound')
        folds = (s.get('fold') or {}).get('count')
        if folds != self.m.folds:
            fail(f'status: {folds} folds, the model {self.m.folds}')
        top = ((s.get('overlay') or {}).get('top') or {}).get('records', 0)
        if top != len(self.m.cur.top or ()):
            fail(f'status: a top of {top} records, the model {len(self.m.cur.top or ())}')
        ov = (s.get('overlay') or {}).get('records', 0)
        if ov != len(self.m.cur.ov):
            fail(f'status: overlay of {ov} records, the model {len(self.m.cur.ov)}')


def main() -> int:
    global FOLD
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--shmctl', required=True)
    ap.add_argument('--loader', required=True)
    ap.add_argument('--reader', action='append', required=True, help='NAME=COMMAND')
    ap.add_argument('--publishes', type=int,
                    default=int(os.environ.get('SHMKV_MODEL_PUBLISHES') or 600),
                    help='run until the cache reaches this generation')
    ap.add_argument('--seed', type=int,
                    default=int(os.environ.get('SHMKV_MODEL_SEED') or time.time_ns() % 10**9))
    ap.add_argument('--keys', type=int, default=2000, help='the key pool')
    ap.add_argument('--iterate', type=float, default=0.1,
                    help='the share of checks that also iterate (always at start and end)')
    ap.add_argument('--fold-entries', type=int, default=FOLD[0],
                    help='the cache\'s fold_entries: a fold once the top holds this many records '
                         '(and fold_ratio of the lower\'s)')
    ap.add_argument('--fold-ratio', type=float, default=FOLD[1], help='the cache\'s fold_ratio')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    args = ap.parse_args()
    if args.fold_entries < 1 or not 0 <= args.fold_ratio <= 100:
        ap.error('--fold-entries: at least 1 (the model has a top); --fold-ratio: 0..100')
    FOLD = (args.fold_entries, args.fold_ratio)
    print(f'writes_model: seed {args.seed} (SHMKV_MODEL_SEED={args.seed} replays it), '
          f'{args.publishes} publishes, {args.keys} keys, readers '
          f'{", ".join(r.partition("=")[0] for r in args.reader)}', flush=True)
    tmp = tempfile.mkdtemp(prefix='shmkv-model.')
    run = Run(args, tmp)
    t0 = time.monotonic()
    try:
        run.run()
    except Failed as e:
        fails.append(str(e))
        print('FAIL:', e, flush=True)
    finally:
        run.stop()
    secs = time.monotonic() - t0
    m = run.model
    answers = run.checks * len(run.readers) * len(run.pool)
    print(f'writes_model: {m.known if m else 0} generations in {secs:.1f} s: '
          + ', '.join(f'{v} {k}' for k, v in sorted(run.counts.items()))
          + f'; {m.auto if m else 0} compactions by the bound; '
          + f'{m.caught_up if m else 0} caught up changes made while they merged; '
          + f'{m.folds if m else 0} folds; '
          f'{run.changes} changes; '
          f'{run.checks} checks ({answers} answers compared), {run.iters} iterations, '
          f'{len(run.readers)} readers')
    if fails:
        with open(os.path.join(tmp, 'log'), 'rb') as f:
            tail = f.read().decode('utf-8', 'replace').splitlines()[-20:]
        print('writes_model: the last lines of the loader\'s and readers\' log:\n  ' + '\n  '.join(tail))
        print(f'writes_model: FAILED ({len(fails)} failures; seed {args.seed}; '
              f'the log, images and deltas are in {tmp})')
        return 1
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print('writes_model: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
