#!/usr/bin/env python3
"""k8s_test: packaging/k8s/*.yaml is valid Kubernetes YAML and follows the
rules a loader and its readers need (a schema check, since no cluster or
kubectl is here):
- every document has apiVersion, kind, metadata.name (and a namespace);
- every volumeMount names a volume; hostPaths are absolute;
- the loader mounts root, spool, shm_dir and hugetlb_dir of its ConfigMap's
  loader.conf at the node's paths (a control segment names segments by the
  loader's path), and every key of that loader.conf is one the loader knows;
- huge page requests equal limits and a memory limit is set;
- containers cannot gain privileges and drop ALL capabilities;
- readers mount the same paths read-only, have the loader's group as a
  supplemental group, and SHMKV_ROOT is the loader's root.
usage: k8s_test.py SOURCE_ROOT"""
import glob
import os
import re
import sys

import yaml

src = sys.argv[1]
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


keys = set(re.findall(r'!strcmp\(k, "([a-z_]+)"\)', open(os.path.join(src, 'loader/config.c')).read()))
docs = []
for f in sorted(glob.glob(os.path.join(src, 'packaging/k8s/*.yaml'))):
    for d in yaml.safe_load_all(open(f)):
        if d is not None:
            docs.append((os.path.basename(f), d))
check(len(docs) >= 4, f'only {len(docs)} documents')

conf = {}
for f, d in docs:
    where = f'{f}: {d.get("kind")} {d.get("metadata", {}).get("name")}'
    check(d.get('apiVersion') and d.get('kind') and d.get('metadata', {}).get('name'),
          f'{where}: apiVersion, kind and metadata.name are required')
    if d['kind'] != 'Namespace':
        check(d['metadata'].get('namespace') == 'shmkv', f'{where}: namespace shmkv')
    if d['kind'] == 'ConfigMap' and 'loader.conf' in d.get('data', {}):
        section = None
        for ln in d['data']['loader.conf'].splitlines():
            ln = ln.split(';')[0].strip()
            if not ln or ln.startswith('#'):
                continue
            if ln.startswith('['):
                section = ln
                continue
            k, _, v = ln.partition('=')
            k, v = k.strip(), v.strip()
            check(k in keys, f'{where}: loader.conf key {k!r} is not one the loader knows')
            if section == '[loader]':
                conf[k] = v
check(conf.get('root') and conf.get('spool'), f'loader.conf: root and spool: {conf}')


def pod_specs():
    for f, d in docs:
        if d['kind'] in ('DaemonSet', 'Deployment', 'StatefulSet'):
            t = d['spec']['template']
            check(d['spec']['selector']['matchLabels'].items() <= t['metadata']['labels'].items(),
                  f'{f}: {d["kind"]}: the selector does not match the template labels')
            yield f, d, t['spec']


loader_paths, loader_gid = {}, None
readers = []
for f, d, spec in pod_specs():
    vols = {v['name']: v for v in spec.get('volumes', [])}
    for v in vols.values():
        if 'hostPath' in v:
            check(v['hostPath']['path'].startswith('/'), f'{f}: hostPath {v} not absolute')
    for c in spec.get('initContainers', []) + spec['containers']:
        sc = c.get('securityContext', {})
        check(sc.get('allowPrivilegeEscalation') is False, f'{f}: {c["name"]}: allowPrivilegeEscalation')
        check('ALL' in sc.get('capabilities', {}).get('drop', []), f'{f}: {c["name"]}: drop ALL')
        for m in c.get('volumeMounts', []):
            check(m['name'] in vols, f'{f}: {c["name"]}: mount of unknown volume {m["name"]}')
        res = c.get('resources', {})
        for r, v in res.get('requests', {}).items():
            if r.startswith('hugepages-'):
                check(res.get('limits', {}).get(r) == v, f'{f}: {c["name"]}: {r} requests != limits')
                check('memory' in res.get('limits', {}), f'{f}: {c["name"]}: huge pages need a memory limit')
    for c in spec['containers']:
        mounts = {m['mountPath']: (m, vols[m['name']]) for m in c.get('volumeMounts', [])
                  if m['name'] in vols}
        if 'shmkv-loader' in c.get('command', [''])[0]:
            loader_gid = spec.get('securityContext', {}).get('runAsGroup')
            for k in ('root', 'spool', 'shm_dir', 'hugetlb_dir'):
                p = conf.get(k)
                if not p:
                    continue
                m = mounts.get(p)
                check(m and m[1].get('hostPath', {}).get('path') == p,
                      f'{f}: the loader\'s {k} {p} is not the node\'s {p} (hostPath at the same path)')
                check(m and not m[0].get('readOnly'), f'{f}: the loader\'s {k} is read-only')
                if m:
                    loader_paths[k] = p
        else:
            readers.append((f, c, spec, mounts))
check(loader_gid is not None and loader_paths.get('root'), 'no loader container found')
check(readers, 'no reader example found')
for f, c, spec, mounts in readers:
    check(loader_gid in spec.get('securityContext', {}).get('supplementalGroups', []),
          f'{f}: readers need the loader\'s group {loader_gid} as a supplemental group')
    env = {e['name']: e.get('value') for e in c.get('env', [])}
    check(env.get('SHMKV_ROOT') == loader_paths.get('root'), f'{f}: SHMKV_ROOT {env.get("SHMKV_ROOT")}')
    for k in ('root', 'shm_dir', 'hugetlb_dir'):
        p = loader_paths.get(k)
        if not p:
            continue
        want = p if k == 'root' else p + '/shmkv'
        m = mounts.get(want)
        check(m and m[0].get('readOnly') is True, f'{f}: readers must mount {want} read-only')
        if m:
            host = m[1]['hostPath']['path'] + ('/' + m[0]['subPath'] if m[0].get('subPath') else '')
            check(host == want, f'{f}: {want} is the node\'s {host}, not {want}')

for f in fails:
    print('FAIL:', f)
print(f'k8s_test: {len(docs)} documents, {len(fails)} failures')
sys.exit(1 if fails else 0)
