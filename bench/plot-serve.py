#!/usr/bin/env python3
"""Plots serve-bench receipts: aggregate generated tok/s and TTFT p95 against
the number of concurrent clients C, one line per server (the receipts'
"label"), as one SVG with two panels. Standard library only.

    bench/plot-serve.py [--title T] OUT.svg RECEIPT.json...

Multi-turn receipts and receipts whose load failed completely are skipped;
when one server has several receipts at one C, the last one read is used.
"""
import json
import math
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
W, H = 980, 420  # whole picture
PW, PH = 380, 280  # one panel's plot area
LEFT, TOP = 90, 70  # first panel's plot area origin
GAP = 110  # between the panels


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def nice_ticks(hi, n=5):
    """0 and round steps up to at least hi."""
    if hi <= 0:
        return [0, 1]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    ticks = [0.0]
    while ticks[-1] < hi:
        ticks.append(ticks[-1] + step)
    return ticks


def fmt(v):
    return f"{v:,.0f}" if v >= 10 or v == 0 else f"{v:g}"


def load(paths):
    series = {}
    for p in paths:
        try:
            with open(p) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print(f"plot-serve: skipping {p}: {e}", file=sys.stderr)
            continue
        cfg, res = r.get("config") or {}, r.get("results") or {}
        if cfg.get("multi_turn") or not res.get("requests", {}).get("completed"):
            continue
        c = cfg.get("concurrency")
        tok = res.get("aggregate_output_tok_s")
        ttft = (res.get("ttft_ms") or {}).get("p95")
        if c is None or tok is None:
            continue
        series.setdefault(r.get("label") or r.get("url") or p, {})[int(c)] = (float(tok), ttft)
    return series


def panel(out, x0, title, ylabel, xs_all, series, pick):
    """One panel: log2 x axis over the C values, linear y axis from 0."""
    cs = sorted(xs_all)
    lo, hi = math.log2(cs[0]), math.log2(cs[-1])
    span = hi - lo or 1.0
    X = lambda c: x0 + (math.log2(c) - lo) / span * PW if len(cs) > 1 else x0 + PW / 2
    ymax = max([pick(v) for s in series.values() for v in s.values() if pick(v) is not None] or [1])
    ticks = nice_ticks(ymax)
    Y = lambda v: TOP + PH - v / ticks[-1] * PH
    out.append(f'<text x="{x0 + PW / 2}" y="{TOP - 14}" text-anchor="middle" font-size="15" font-weight="bold">{esc(title)}</text>')
    out.append(f'<rect x="{x0}" y="{TOP}" width="{PW}" height="{PH}" fill="none" stroke="#444"/>')
    for t in ticks:
        y = Y(t)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + PW}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="12">{fmt(t)}</text>')
    for c in cs:
        out.append(f'<line x1="{X(c):.1f}" y1="{TOP}" x2="{X(c):.1f}" y2="{TOP + PH}" stroke="#eee"/>')
        out.append(f'<text x="{X(c):.1f}" y="{TOP + PH + 18}" text-anchor="middle" font-size="12">{c}</text>')
    out.append(f'<text x="{x0 + PW / 2}" y="{TOP + PH + 40}" text-anchor="middle" font-size="13">concurrent clients C</text>')
    out.append(f'<text transform="translate({x0 - 58},{TOP + PH / 2}) rotate(-90)" text-anchor="middle" font-size="13">{esc(ylabel)}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        col = COLORS[i % len(COLORS)]
        xy = [(X(c), Y(pick(v)), pick(v)) for c, v in sorted(pts.items()) if pick(v) is not None]
        if len(xy) > 1:
            out.append(f'<polyline fill="none" stroke="{col}" stroke-width="2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y, _ in xy)}"/>')
        for x, y, v in xy:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{col}"><title>{esc(name)}: {fmt(v)}</title></circle>')
            out.append(f'<text x="{x:.1f}" y="{y - 8:.1f}" text-anchor="middle" font-size="10" fill="{col}">{fmt(v)}</text>')


def main(argv):
    title = "OpenAI-compatible serving: streaming clients, same weights"
    if len(argv) >= 2 and argv[0] == "--title":
        title, argv = argv[1], argv[2:]
    if len(argv) < 2:
        sys.exit(__doc__.strip())
    out_path, paths = argv[0], argv[1:]
    series = load(paths)
    if not series:
        sys.exit("plot-serve: no usable receipt (a load receipt with completed requests)")
    xs = {c for s in series.values() for c in s}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="24" text-anchor="middle" font-size="16">{esc(title)}</text>']
    panel(out, LEFT, "aggregate generated tok/s (higher is better)", "tokens / s", xs, series, lambda v: v[0])
    panel(out, LEFT + PW + GAP, "TTFT p95 (lower is better)", "ms", xs, series, lambda v: v[1])
    for i, name in enumerate(sorted(series)):  # legend under the panels
        x, y = LEFT + i * 300, H - 14
        out.append(f'<rect x="{x}" y="{y - 10}" width="14" height="10" fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 20}" y="{y}" font-size="13">{esc(name)}</text>')
    out.append("</svg>")
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    import os
    os.replace(tmp, out_path)
    print(f"plot-serve: {out_path} ({len(series)} servers, C = {', '.join(map(str, sorted(xs)))})")


if __name__ == "__main__":
    main(sys.argv[1:])
