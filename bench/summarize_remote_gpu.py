#!/usr/bin/env python3
"""Table of bench/remote_gpu.sh's raw JSON: per setup, the median (min..max) over rounds of
training img/s and inference Offline samples/s at batch 8, each as a fraction of local's median,
and the remote traffic per training step and per inference query. Then a serial model of the
remote overhead per step or query against the measured one: the bytes at the link's rate plus a
round trip (2 x the one-way latency) per request, added to local's median time; no overlap of
the gradients' transfer with backward is assumed, so it is an upper bound where that overlaps."""
import glob, json, os, re, statistics, sys

raw = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(raw, "*.json"))):
    m = re.match(r"(train|infer)_(.+)_r(\d+)\.json$", os.path.basename(f))
    if not m:
        continue
    kind, setup, _ = m.groups()
    d = json.load(open(f))
    r = rows.setdefault(setup, {"train": [], "infer": [], "step": None, "query": None})
    if kind == "train":
        r["train"].append(d["summary"]["total_img_s"]["mean"])
        if "remote" in d["meta"]:
            r["step"] = d["meta"]["remote"]["per_step"]
    else:
        r["infer"].append(d["offline"][0]["samples_per_s"])
        if "remote" in d["meta"]:
            r["query"] = d["meta"]["remote"]["per_query_at_max_batch"]

def med(v):
    return statistics.median(v) if v else float("nan")

def key(setup):
    if setup == "local":
        return (0, 0, 0)
    m = re.match(r"remote_([\d.]+)g_(\d+)us", setup)
    g, lat = float(m.group(1)), int(m.group(2))
    return (1, -g if g else -1e9, lat)

local = rows.get("local", {"train": [], "infer": []})
print("| setup | train img/s median (min..max) | of local | infer Offline samples/s median (min..max) | of local |"
      " MB up / down per step | round trips per step | MB up / down per query | rounds |")
print("|---|---|---|---|---|---|---|---|---|")
for setup in sorted(rows, key=key):
    r = rows[setup]
    t, i = r["train"], r["infer"]
    ft = med(t) / med(local["train"]) if local["train"] else float("nan")
    fi = med(i) / med(local["infer"]) if local["infer"] else float("nan")
    step = r["step"] or {}
    q = r["query"] or {}
    name = "local (--device cpu)" if setup == "local" else setup.replace("remote_0g_0us", "remote, loopback unshaped")
    print(f"| {name} | {med(t):.2f} ({min(t):.2f}..{max(t):.2f}) | {ft:.0%} | {med(i):.2f} ({min(i):.2f}..{max(i):.2f}) | {fi:.0%} | "
          + (f"{step['sent_bytes']/1e6:.1f} / {step['received_bytes']/1e6:.1f} | {step['round_trips']} | " if step else "- | - | ")
          + (f"{q['sent_bytes']/1e6:.2f} / {q['received_bytes']/1e6:.2f} | " if q else "- | ")
          + f"{len(t)} |")

print()
print("| setup | train step s: local | measured | modelled (local + bytes/rate + trips x 2 x latency) | error |"
      " infer query s: local | measured | modelled | error |")
print("|---|---|---|---|---|---|---|---|---|")
batch = 8
for setup in sorted(rows, key=key):
    if setup == "local" or not local["train"]:
        continue
    m = re.match(r"remote_([\d.]+)g_(\d+)us", setup)
    gbps, lat = float(m.group(1)), int(m.group(2)) * 1e-6
    if gbps == 0:
        continue  # unshaped loopback: no link model
    r = rows[setup]
    def model(base_s, t):
        return base_s + (t["sent_bytes"] + t["received_bytes"]) * 8 / (gbps * 1e9) + t["round_trips"] * 2 * lat
    ts_local, ts = batch / med(local["train"]), batch / med(r["train"])
    qs_local, qs = batch / med(local["infer"]), batch / med(r["infer"])
    tm = model(ts_local, r["step"]) if r["step"] else float("nan")
    qm = model(qs_local, r["query"]) if r["query"] else float("nan")
    print(f"| {setup} | {ts_local:.3f} | {ts:.3f} | {tm:.3f} | {tm / ts - 1:+.0%} | {qs_local:.4f} | {qs:.4f} | {qm:.4f} | {qm / qs - 1:+.0%} |")
