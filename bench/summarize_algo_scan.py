#!/usr/bin/env python3
"""Allreduce runs named VARIANT-nN-rR.json in DIR (ringbench allreduce --json): out-of-place
busbw GB/s per (N, size), median [min-max] over the runs of each variant, side by side.

  bench/summarize_algo_scan.py DIR
"""
import json,glob,statistics as st,collections,sys
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    a,n,r=f.split('/')[-1][:-5].split('-')
    for row in json.load(open(f))['rows']:
        if row['inplace']: continue
        d[(int(n[1:]),row['bytes'],a)].append(row['busbw_gbps'])
algos=sorted({k[2] for k in d})
for n in sorted({k[0] for k in d}):
    print(f"N={n}  busbw GB/s median [min-max]")
    print("size".rjust(8),*[a.rjust(20) for a in algos])
    for sz in sorted({k[1] for k in d if k[0]==n}):
        cells=[]
        for a in algos:
            v=d.get((n,sz,a),[])
            cells.append((f"{st.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" if v else "-").rjust(20))
        print((f"{sz // 1024}K" if sz >= 1024 else str(sz)).rjust(8), *cells)
