#!/usr/bin/env python3
"""Per setting of a check sweep: the median, range and per-repeat total img/s, and each setting's
paired per-repeat ratio to the best median (repeats alternate, so repeat r of every setting ran
side by side). Usage: summarize_check.py CHECK_DIR"""
import collections
import json
import statistics
import sys


def img_s_by_setting(check_dir):
    """{"compression/fusion/first/segment": {repeat: total img/s}} of a check's ok train points."""
    by = collections.defaultdict(dict)
    for line in open(check_dir + "/raw.jsonl"):
        d = json.loads(line)
        if d.get("kind") != "train" or d.get("status") != "ok":
            continue
        key = f'{d["compression"]}/{d["fusion_mb"]:g}/{d["first_bucket_mb"]:g}/{d["segment"]}'
        by[key][d["repeat"]] = d["train"]["summary"]["total_img_s"]["mean"]
    return by


def main():
    by = img_s_by_setting(sys.argv[1])
    med = {k: statistics.median(v.values()) for k, v in by.items()}
    best = max(med, key=med.get)
    print(f"| setting | median img/s | range | vs best median | paired ratio to {best} (median) |")
    print("|---|---:|---|---:|---:|")
    for k in sorted(med, key=med.get, reverse=True):
        v = by[k]
        pair = [v[r] / by[best][r] for r in v if r in by[best]]
        print(f"| {k} | {med[k]:.1f} | {min(v.values()):.1f}-{max(v.values()):.1f} | "
              f"{(med[k] / med[best] - 1) * 100:+.1f}% | {statistics.median(pair):.3f} |")


if __name__ == "__main__":
    main()
