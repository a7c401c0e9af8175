#!/usr/bin/env python3
"""Summarize bench/migration.sh runs: stun and total migration time against framebuffer size,
pre-copy against stop-and-copy, a fitted link model with predictions for larger profiles, and the
job's img/s around each migration. Writes summary.md and stun.svg into the run directory.

    bench/summarize_migration.py RUN_DIR [--predict 16G,24G] [--at 15 --warmup 5]
"""
import argparse, glob, json, os, statistics

GIB = 1 << 30
MIB = 1 << 20


def load(run_dir):
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "*.json"))):
        doc = json.load(open(path))
        m = doc.get("migration")
        if not m:
            continue
        rows.append({"file": os.path.basename(path), "m": m, "step_s": doc["ranks"][0]["step_s"],
                     "batch": doc["meta"]["batch_per_rank"], "ranks": doc["meta"]["ranks"]})
    return rows


def fit_line(xs, ys):
    """Least squares y = a + b x; returns a, b."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def size_bytes(text):
    units = {"K": 1 << 10, "M": MIB, "G": GIB}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def timeline(row, at, warmup):
    """Job img/s per step: before the migration, during pre-copy, the stun step, after."""
    img = [row["batch"] * row["ranks"] / s for s in row["step_s"]]
    start = at - warmup
    stun = max(range(start, len(img)), key=lambda i: row["step_s"][i])
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    return med(img[:start]), med(img[start:stun]), img[stun], med(img[stun + 1:]), stun - start


def svg_plot(points, predicted, path):
    """stun (s) against framebuffer (GiB), one polyline per method; predicted points hollow."""
    w, h, pad = 560, 340, 50
    xs = [p[1] for ps in points.values() for p in ps] + [p[1] for ps in predicted.values() for p in ps]
    ys = [p[2] for ps in points.values() for p in ps] + [p[2] for ps in predicted.values() for p in ps]
    xmax, ymax = max(xs) * 1.05, max(ys) * 1.1
    X = lambda x: pad + (w - 2 * pad) * x / xmax
    Y = lambda y: h - pad - (h - 2 * pad) * y / ymax
    colours = {"precopy": "#1f77b4", "stopcopy": "#d62728"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<line x1="{pad}" y1="{h-pad}" x2="{w-pad}" y2="{h-pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h-pad}" stroke="black"/>',
           f'<text x="{w/2}" y="{h-12}" text-anchor="middle">framebuffer (GiB)</text>',
           f'<text x="14" y="{h/2}" transform="rotate(-90 14 {h/2})" text-anchor="middle">stun (s)</text>',
           f'<line x1="{pad}" y1="{Y(1)}" x2="{w-pad}" y2="{Y(1)}" stroke="#888" stroke-dasharray="4"/>',
           f'<text x="{w-pad}" y="{Y(1)-4}" text-anchor="end" fill="#888">1 s (vMotion stun target)</text>']
    for gib in sorted({p[1] for ps in list(points.values()) + list(predicted.values()) for p in ps}):
        out.append(f'<text x="{X(gib)}" y="{h-pad+14}" text-anchor="middle">{gib:g}</text>')
    for k in range(0, 6):
        y = ymax * k / 5
        out.append(f'<text x="{pad-6}" y="{Y(y)+4}" text-anchor="end">{y:.1f}</text>')
    for method, ps in points.items():
        c = colours.get(method, "black")
        allp = sorted(ps + predicted.get(method, []), key=lambda p: p[1])
        out.append('<polyline fill="none" stroke="%s" points="%s"/>' % (c, " ".join(f"{X(p[1])},{Y(p[2])}" for p in allp)))
        for p in ps:
            out.append(f'<circle cx="{X(p[1])}" cy="{Y(p[2])}" r="3.5" fill="{c}"/>')
        for p in predicted.get(method, []):
            out.append(f'<circle cx="{X(p[1])}" cy="{Y(p[2])}" r="4" fill="white" stroke="{c}"/>')
    for i, (method, c) in enumerate(colours.items()):
        out.append(f'<text x="{pad+10}" y="{pad+14*i}" fill="{c}">{method} (filled: measured, hollow: predicted)</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--predict", default="16G,24G")
    ap.add_argument("--at", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--line-gbit", type=float, default=10, help="the link's nominal rate, for the line-rate prediction")
    a = ap.parse_args()
    rows = load(a.run_dir)
    if not rows:
        raise SystemExit(f"no migration results (*.json with \"migration\") in {a.run_dir}")
    lines = ["| method | framebuffer | moved | pre-copy rounds | pre-copied MiB | pre-copy s | stun MiB | stun s | total s | ring stall s | img/s before | during pre-copy | at the stun | after |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by_method = {}
    for r in sorted(rows, key=lambda r: (r["m"]["method"], r["m"]["framebuffer_bytes"])):
        m = r["m"]
        before, during, dip, after, _ = timeline(r, a.at, a.warmup)
        lines.append(f"| {m['method']} | {m['framebuffer_bytes']/GIB:g} GiB | {m['moved']} | {m.get('precopy_rounds', 0)} | "
                     f"{m['precopy_bytes']/MIB:.0f} | {m['precopy_s']:.2f} | {m['stun_bytes']/MIB:.0f} | {m.get('stun_s', float('nan')):.3f} | "
                     f"{m.get('total_s', float('nan')):.2f} | {m['ring_stall_s']:.3f} | {before:.1f} | {during:.1f} | {dip:.1f} | {after:.1f} |")
        if m.get("forced_at_last_step"):
            lines[-1] = lines[-1].replace(f"| {m['method']} |", f"| {m['method']} (forced at the last step: not in the model) |", 1)
        elif m["moved"]:
            by_method.setdefault(m["method"], []).append((r, m["framebuffer_bytes"] / GIB, m["stun_s"]))
    model, predicted = [], {}
    targets = [size_bytes(t) / GIB for t in a.predict.split(",") if t]
    if len(by_method.get("stopcopy", [])) >= 2:
        pts = by_method["stopcopy"]
        t0, per_gib = fit_line([p[1] for p in pts], [p[2] for p in pts])
        rate = 1 / per_gib if per_gib > 0 else float("inf")
        sizes = len({p[1] for p in pts})
        model.append(f"- **Stop-and-copy:** stun = {t0:.3f} s + F / {rate*GIB*8/1e9:.2f} Gbit/s (least squares over "
                     f"{len(pts)} runs of {sizes} sizes{': two sizes, so no test of the line' if sizes == 2 else ''}; "
                     f"{rate:.2f} GiB/s is the rate the copy reached here, against the link's nominal "
                     f"{a.line_gbit:g} Gbit/s), linear in the framebuffer F.")
        predicted["stopcopy"] = [(None, g, t0 + g * per_gib) for g in targets]
    fit = None
    if len(by_method.get("stopcopy", [])) >= 2:
        pts = by_method["stopcopy"]
        fit = fit_line([p[1] for p in pts], [p[2] for p in pts])
    if by_method.get("precopy"):
        pts = by_method["precopy"]
        stun_mib = [p[0]["m"]["stun_bytes"] / MIB for p in pts]
        stuns = [p[2] for p in pts]
        s_med = statistics.median(stuns)
        model.append(f"- **Pre-copy:** the stun copies only what the job wrote since the last round: "
                     f"{min(stun_mib):.0f}–{max(stun_mib):.0f} MiB, the state and activations one step rewrites "
                     f"({pts[0][0]['m']['state_bytes']/MIB:.0f} MiB), whatever the framebuffer's size; "
                     f"measured stun {min(stuns):.3f}–{max(stuns):.3f} s (median {s_med:.3f} s). "
                     "Predicted for larger profiles: the same working set, so the median measured stun.")
        predicted["precopy"] = [(None, g, s_med) for g in targets]
        if fit and a.line_gbit > 0:
            w = pts[0][0]["m"]["state_bytes"] / GIB
            line = fit[0] + w * GIB / (a.line_gbit * 1e9 / 8)
            model.append(f"- At the link's nominal rate ({a.line_gbit:g} Gbit/s): "
                         f"pre-copy stun = {fit[0]:.3f} s + {w*1024:.0f} MiB / {a.line_gbit:g} Gbit/s = {line:.3f} s "
                         "(the fixed part from the stop-and-copy fit), for every framebuffer size.")
    pred_lines = ["| method | framebuffer | predicted stun s |", "|---|---:|---:|"]
    for method, ps in predicted.items():
        for _, g, s in ps:
            pred_lines.append(f"| {method} | {g:g} GiB | {s:.2f} (predicted) |")
    svg_plot({k: v for k, v in by_method.items()}, predicted, os.path.join(a.run_dir, "stun.svg"))
    text = ("# Live migration of a training rank: stun against framebuffer size\n\n" + "\n".join(lines) + "\n\n"
            "## Model\n\n" + "\n".join(model) + "\n\n" + "\n".join(pred_lines) + "\n\n![stun](stun.svg)\n")
    open(os.path.join(a.run_dir, "summary.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
