#!/usr/bin/python3
"""Rewrites unsupported.json, known_failures.json and differences.json from one run's statuses, with the reasons
and diagnoses below. Use it after regenerating the goldens (sample ids move) or after a batch of
fixes; for a single fix, deleting its entries by hand is enough (the suite says which).

  LOOM_OPINFO_REPORT=/tmp/opinfo.json bun test tests/opinfo/opinfo.test.ts   (lists emptied first)
  /usr/bin/python3 tests/opinfo/update_lists.py /tmp/opinfo.json

A non-passing sample that no rule below explains is printed as TODO and listed nowhere, so the
suite fails on it: investigate it, then fix it or add a rule with its diagnosis.
"""
import glob
import json
import os
import re
import sys

W = os.path.dirname(os.path.abspath(__file__)) + "/"
r = json.load(open(sys.argv[1]))
S={}
for f in glob.glob(W+'goldens/*.json'):
    for s in json.load(open(f))['samples']: S[s['id']]=s
UR=[
 (r'keyword out=', "out=: Loom ops return new tensors and take no out= argument"),
 (r'keyword memory_format=', "memory_format=: Loom has no memory-format argument (tensors are row-major; clone/contiguous return row-major)"),
 (r'Python scalar as self', "a Python scalar as self (torch.add(2, t)): Loom ops are tensor methods, and a 0-d tensor in its place has other type promotion"),
 (r'integral Python float', "an integral Python float scalar where no float tensor sets the result dtype: a JS number cannot carry Python's float type (torch.arange(0., 3) is float32)"),
 (r'bool start/end', "bool start/end in arange: Loom's arange takes numbers"),
 (r'\[transpose\] dim -2 is out of range for a tensor of 0 dims', "mT of a 0-d tensor: torch 1.13 returns it unchanged; torch >= 2.0 raises, as Loom does"),
 (r'\[where\] at least one of input/other must be a tensor', "torch.where(cond, scalar, scalar): Loom's where needs input or other to be a tensor"),
 (r'float64 is not supported on the webgpu', "dtype=float64 on webgpu: WGSL has no 64-bit floats"),
 (r'\[(conv[12]d|avg_pool[12]d)\] expected (a )?floating', "integer conv1d/conv2d/avg_pool: Loom refuses integer inputs with a typed error (the GEMM lowering and the window mean are floating); torch's CPU has integer kernels"),
 (r'\[batch_norm\] expected an input of at least 2 dims \[N, C, \*\], got \[0\]', "batch_norm of a 1-D empty input (shape [0]): torch 1.13 reads it as [N] with no channel dim; Loom requires [N, C, *] and refuses it with a typed error"),
 (r'\[cat\] sizes of tensors must match except in dimension 0: got \[0\]', "cat with a legacy 1-D empty tensor (shape [0]) beside higher-rank tensors: torch skips it (a legacy rule), Loom requires matching ranks"),
]
ZERO_D="{op} with a 0-d input/index/source: refused, wrong shape or value, or a backward shape error; torch treats 0-d as size 1 (issue 9 section 2, 0-d index kernels)"
KR=[
 (r'div\.floor_rounding/', r'backward throws', "div(rounding_mode='floor') records no gradient: backward throws; torch's gradient is zero (issue 9 section 3)"),
 (r'.*', r'reading the results throws', "an index error of an earlier sample's kernel sits in webgpu's one global error buffer and is raised by this unrelated read (issue 9 section 2, webgpu index errors)"),
 (r'(amax|amin)/error/', r'no error', "amax/amin of an empty tensor (or an empty reduced dim) returns -inf/inf; torch raises (issue 9 section 2)"),
 (r'arange/', r'.', "arange with an integer dtype and float bounds: torch casts start/end/step to int64 first (arange(0., -8.000001, -4., dtype=int64) has 2 elements), Loom counts with the float bounds (issue 9 section 3)"),
 (r'linspace/int', r'.', "D:integer linspace: torch 1.13 truncates start + step*i per SIMD vector of i (Vectorized<int64>::arange from a truncated base), so its values depend on the CPU's vector width; Loom truncates the exact start + step*i (linspace(0, -3, 50) has 17 zeros; torch on AVX2 20)"),
 (r'sign/', r'NaN', "sign(nan) gives NaN; torch gives 0 (issue 9 section 3)"),
 (r'(abs|nn\.functional\.relu|clamp)/', r'grad.*NaN', "the abs/relu/clamp gradient at NaN inputs is NaN; torch gives 0 there (issue 9 section 3)"),
 (r'nn\.functional\.layer_norm/float32/', r'.', "D:normalized size 1: the exact result is bias (x - mean(x) = 0 for one element) with a zero input gradient, which Loom gives; torch's float32 CPU kernel is off by up to 6.5e-5 (its one-element mean is inexact)"),
 (r'nn\.functional\.conv2d/float32/', r'mismatch', "D:float32 conv2d over 36 products with large cancelling terms: torch's CPU kernel (mkldnn/im2col order) is off by up to 2.4e-5 from the float64 result, Loom's GEMM order by under 1e-5 (s29 out[24]: exact -3.608662, torch -3.608638, Loom -3.608653)"),
 (r'remainder/', r'.', "remainder(-1e20, -501): Loom computes a - floor(a/b)*b, which loses the answer (0) for large a; torch uses fmod: r = fmod(a, b), plus b when r != 0 and its sign differs from b's (-388). Fix in the js ref and native elementwise.c OP_remainder"),
 (r'pow/int', r'Infinity', "integer pow with a negative exponent: 0 ** -7 gives Infinity stored in an int64 tensor; torch gives 0 (integer pow: 1 for base 1, +-1 for base -1, else 0). Fix the int path of pow on every backend"),
 (r'(topk|kthvalue)/int(32|64)/', r'mismatch: eager: out\[1\]', "D:indices among equal integer values: torch's CPU topk/kthvalue (partial sort / quickselect) return any of the tied positions, Loom the lowest index first (documented in src/lazy/sort_ops.ts); the values match"),
]
def is0d(sid):
    s=S[sid]; return any(t['shape']==[] for t in s['tensors'])
def classify(sid, st):
    op=sid.split('/')[0]
    if st.startswith('unsupported'):
        for pat, why in UR:
            if re.search(pat, st): return ('U', why)
    if op in ('gather','scatter_add','index_add','index_select') and is0d(sid) and 'reading the results' not in st:
        return ('K', ZERO_D.format(op=op))
    for idpat, stpat, why in KR:
        if 'layer_norm' in idpat and S[sid]['args'][:1] != [[1]]: continue  # only normalized size 1
        if re.match(idpat, sid) and re.search(stpat, st): return ('K', why)
    if op=='norm' and sid in S:
        p=S[sid]['args'][0] if S[sid]['args'] else None
        if p==0: return ('K', "norm with p=0 gives Infinity; torch counts the non-zeros (issue 9 section 3)")
    if op=='norm.inf': return ('K', "norm with p=-inf gives 1; torch gives min |x| (issue 9 section 3)")
    return None
U={}; K={}; D={}; todo=[]
ids=sorted({i for b in r for i in r[b]})
for sid in ids:
    ran=[b for b in r if sid in r[b]]
    bad={b: r[b][sid] for b in ran if r[b][sid]!='pass'}
    if not bad: continue
    cls={b: classify(sid, st) for b,st in bad.items()}
    if any(c is None for c in cls.values()):
        todo.append((sid, bad)); continue
    same = len(set(cls.values()))==1 and set(bad)==set(ran)
    for b,c in cls.items():
        key = sid if same else f'{sid}@{b}'
        if c[0]=='U': U.setdefault(c[1], []).append(key)
        elif c[1].startswith('D:'): D[key]=c[1][2:]  # torch is the inexact side
        else: K[key]=c[1]
        if same: break
json.dump({k: sorted(v) for k,v in U.items()}, open(W+'unsupported.json','w'), indent=1); open(W+'unsupported.json','a').write('\n')
json.dump(dict(sorted(K.items())), open(W+'known_failures.json','w'), indent=1); open(W+'known_failures.json','a').write('\n')
json.dump(dict(sorted(D.items())), open(W+'differences.json','w'), indent=1); open(W+'differences.json','a').write('\n')
for t in todo: print('TODO', t)
print(len(K), sum(len(v) for v in U.values()))
