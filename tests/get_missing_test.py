#!/usr/bin/env python3
"""get_missing_test: `shmctl image get FILE KEY` and `shmctl cache get NAME
KEY` name the key they did not find and where they looked, in plain output
(stderr) and with -j ({"error", "key" or "key_base64"}): printable keys as
text, the rest escaped; exit 1. The cache case against a real shmkv-loader.
usage: get_missing_test.py SHMCTL SHMKV_LOADER"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

from pyutil import check, finish, start_loader, stop_loader, write

shmctl, loader = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix='shmkv-get-missing-test.')


def get(*args):
    """shmctl ARGS: (exit code, stdout, stderr)."""
    r = subprocess.run([shmctl] + list(args), capture_output=True)
    return r.returncode, r.stdout.decode('utf-8', 'replace'), r.stderr.decode('utf-8', 'replace')


def missing(where_args, where_text, key, shown, root=None):
    """The key (bytes) is absent: plain names it as shown, -j carries it."""
    utf8 = True
    try:
        key.decode('utf-8')
    except UnicodeDecodeError:
        utf8 = False
    # a key that is not UTF-8 (or has a NUL) can only be typed as base64
    if utf8 and b'\0' not in key:
        kargs = [key.decode('utf-8')]
    else:
        kargs = ['--key-base64', base64.b64encode(key).decode()]
    opts = ['-r', root] if root else []
    obj = where_args[0]
    rc, out, err = get(obj, 'get', *opts, *kargs[:-1], where_args[1], kargs[-1])
    want = f'shmctl: error: key not found: {shown} in {where_text}\n'
    check(rc == 1 and out == '' and err == want,
          f'{obj} get {key!r}: exit {rc}, stdout {out!r}, stderr {err!r}; want {want!r}')
    rc, out, err = get('-j', obj, 'get', *opts, *kargs[:-1], where_args[1], kargs[-1])
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    check(rc == 1 and j.get('error') == want[len('shmctl: error: '):-1],
          f'{obj} get -j {key!r}: exit {rc}, {out!r}')
    if utf8:
        check(j.get('key') == key.decode('utf-8') and 'key_base64' not in j,
              f'-j key of {key!r}: {j}')
    else:
        check(j.get('key_base64') == base64.b64encode(key).decode() and 'key' not in j,
              f'-j key_base64 of {key!r}: {j}')


proc = None
try:
    jsonl = os.path.join(tmp, 'in.jsonl')
    # one entry that expired in 2001, one that never does
    write(jsonl, '{"key": "present", "value": "v"}\n'
                 '{"key": "gone", "value": "v", "expires": 1000000000}\n')
    img = os.path.join(tmp, 'img.shmkv')
    r = subprocess.run([shmctl, 'image', 'build', '-o', img, jsonl], capture_output=True, text=True)
    check(r.returncode == 0, f'image build: {r.stderr}')
    where = ('image', img)
    wtext = f'image {img}'
    cases = [
        (b'user:9:name', '"user:9:name"'),
        ('ключ:é'.encode(), '"ключ:é"'),                      # printable UTF-8 as it is
        (b'a"b\\c\nd\te\x01\x7f', '"a\\"b\\\\c\\nd\\te\\x01\\x7f"'),
        (b'\xff\xfeA', '"\\xff\\xfeA"'),                       # not UTF-8
        ('x\u0085y'.encode(), '"x\\xc2\\x85y"'),               # a C1 control
        (b'\xe2\x82', '"\\xe2\\x82"'),                         # a cut sequence
        (b'nul\0byte', '"nul\\x00byte"'),
        (b'k' * 300, '"' + 'k' * 256 + '"... (300 bytes)'),
    ]
    for key, shown in cases:
        missing(where, wtext, key, shown)
    # an expired key: not found, and why
    rc, out, err = get('image', 'get', img, 'gone')
    check(rc == 1 and err.startswith(f'shmctl: error: key not found: "gone" in {wtext}: key expired at 1000000000'),
          f'expired key: exit {rc}, {err!r}')
    # a key that is there still prints its value alone
    rc, out, err = get('image', 'get', img, 'present')
    check(rc == 0 and out == 'v\n' and err == '', f'present key: exit {rc}, {out!r}, {err!r}')

    # cache get: the same words, the cache named
    root, spool, shm = (os.path.join(tmp, d) for d in ('root', 'spool', 'shm'))
    for d in (root, spool, shm):
        os.mkdir(d, 0o755)
    log = open(os.path.join(tmp, 'loader.log'), 'w')
    proc = start_loader(loader, root, ['--spool', spool, '--shm-dir', shm, '--memory', 'shm'], log)
    r = subprocess.run([shmctl, 'cache', 'load', '-r', root, 'things', img], capture_output=True,
                       text=True)
    check(r.returncode == 0, f'cache load: {r.returncode} {r.stdout} {r.stderr}')
    for key, shown in cases[:4]:
        missing(('cache', 'things'), 'cache things', key, shown, root=root)
    rc, out, err = get('cache', 'get', '-r', root, 'things', 'present')
    check(rc == 0 and out == 'v\n', f'cache get present: exit {rc}, {out!r}, {err!r}')
    subprocess.run([shmctl, 'cache', 'drop', '-r', root, 'things'], capture_output=True)
finally:
    stop_loader(proc)
    shutil.rmtree(tmp, ignore_errors=True)

finish('get_missing_test')
