#!/usr/bin/env python3
"""tune's choice against each other setting of a check sweep, repeat by repeat (repeats
alternate, so repeat r of every setting ran side by side): the median and geometric mean of the
paired img/s ratios, and a 95% t interval of the geometric mean (on the log ratios).
Usage: paired_ci.py CHECK_DIR 'COMPRESSION/FUSION/FIRST/SEGMENT'"""
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tune-n4-20261129"))
from summarize_check import img_s_by_setting  # noqa: E402

T95 = {4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201}
by = img_s_by_setting(sys.argv[1])
choice = sys.argv[2]
print(f"| {choice} against | repeats | paired ratio, median | geometric mean | 95% interval |")
print("|---|---:|---:|---:|---|")
for k in sorted(by):
    if k == choice:
        continue
    logs = [math.log(by[choice][r] / by[k][r]) for r in by[choice] if r in by[k]]
    n = len(logs)
    mean, half = statistics.mean(logs), T95[n - 1] * statistics.stdev(logs) / math.sqrt(n)
    print(f"| {k} | {n} | {math.exp(statistics.median(logs)):.3f} | {math.exp(mean):.3f} | "
          f"{math.exp(mean - half):.3f}-{math.exp(mean + half):.3f} |")
