#!/usr/bin/env python3
"""SVG plot of tools/bench-cpu-vs-llama.sh receipts: tok/s against threads,
wisp and llama.cpp side by side, one panel per model and phase.

    tools/plot-cpu-vs-llama.py RECEIPT.json [...] -o PLOT.svg

Plain SVG written by hand (no plotting library is in Debian's base
install, and the plot is a few lines and dots)."""
import json
import sys


def panels(receipts):
    out = {}
    for path in receipts:
        for row in json.load(open(path))["summary"]:
            for phase in ("prefill", "decode"):
                key = (row["model"], phase)
                out.setdefault(key, []).append(
                    (row["threads"], row[f"wisp_{phase}_tok_s"], row[f"llama_{phase}_tok_s"]))
    return {k: sorted(v) for k, v in sorted(out.items())}


def svg(data):
    W, H, pad = 320, 220, 46
    cols = 2
    rows = (len(data) + cols - 1) // cols
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * W}" height="{rows * H + 30}" '
             'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="18" font-size="13">tok/s against threads: wisp (blue) and llama.cpp (orange), '
             'same weights</text>']
    for i, ((model, phase), pts) in enumerate(data.items()):
        ox, oy = (i % cols) * W, 30 + (i // cols) * H
        xs = [p[0] for p in pts]
        ymax = max(max(p[1], p[2]) for p in pts) * 1.1
        xmax = max(xs)

        def px(x):
            return ox + pad + (W - pad - 14) * (x / xmax)

        def py(y):
            return oy + H - pad + 10 - (H - pad - 20) * (y / ymax)
        parts.append(f'<text x="{ox + pad}" y="{oy + 14}" font-weight="bold">{model}: {phase}</text>')
        parts.append(f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(xmax)}" y2="{py(0)}" stroke="#888"/>')
        parts.append(f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(0)}" y2="{py(ymax)}" stroke="#888"/>')
        for x in xs:
            parts.append(f'<text x="{px(x)}" y="{py(0) + 14}" text-anchor="middle">{x}</text>')
        for frac in (0.5, 1.0):
            v = ymax / 1.1 * frac
            parts.append(f'<text x="{px(0) - 4}" y="{py(v) + 4}" text-anchor="end">{v:.0f}</text>')
        for idx, color in ((1, "#1f77b4"), (2, "#ff7f0e")):
            line = " ".join(f"{px(p[0]):.1f},{py(p[idx]):.1f}" for p in pts)
            parts.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
            for p in pts:
                parts.append(f'<circle cx="{px(p[0]):.1f}" cy="{py(p[idx]):.1f}" r="3" fill="{color}"/>')
        for p in pts:
            parts.append(f'<text x="{px(p[0]):.1f}" y="{py(max(p[1], p[2])) - 6:.1f}" text-anchor="middle" '
                         f'fill="#333">{p[1] / p[2]:.2f}x</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv):
    if "-o" not in argv or argv.index("-o") + 1 >= len(argv):
        sys.exit("usage: plot-cpu-vs-llama.py RECEIPT.json [...] -o PLOT.svg")
    i = argv.index("-o")
    out, receipts = argv[i + 1], argv[:i] + argv[i + 2:]
    if not receipts:
        sys.exit("plot-cpu-vs-llama.py: no receipts")
    text = svg(panels(receipts))
    with open(out + ".tmp", "w") as f:
        f.write(text)
    import os
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main(sys.argv[1:])
