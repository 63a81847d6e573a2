#!/usr/bin/env python3
"""The receipt of bench/attn-long-h200.sh as JSON and as a plot.

    tools/plot-attn-long.py RUN/summary.txt "TITLE" -> RUN/summary.json, RUN/ratio.svg

summary.txt has a line per (model, workload): the workload ("decode at
depth N", "prefill N", "S sequences a step"), wisp's tok/s, the variant
columns, llama.cpp's tok/s and the ratio (then the ratio of the f16 K/V
run, decode lines only, and of the TUNED run, where they ran). The plot draws the ratio of each
line as a bar on a log scale, 1.0x (parity) and the issue's targets marked.
Standard library only: a receipt is read where nothing else is installed.
"""
import json
import math
import re
import sys

LINE = re.compile(r"^(\S+)\s+(decode at depth \d+|prefill \d+|\d+ sequences a step)\s+(\d+)\s.*?\s(\d+)\s+([\d.]+)x"
                  r"(?:\s+([\d.]+)x|\s+-)?(?:\s+([\d.]+)x|\s+-)?\s*$")


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            row = {"model": m.group(1), "workload": m.group(2), "wisp_tok_s": float(m.group(3)),
                   "llama_cpp_tok_s": float(m.group(4)), "ratio": float(m.group(5))}
            if m.group(6):  # the f16 K/V column's ratio (llama.cpp's default K/V type)
                row["ratio_f16_kv"] = float(m.group(6))
            if m.group(7):  # the TUNED column's ratio (a candidate default, named in the receipt)
                row["ratio_tuned"] = float(m.group(7))
            rows.append(row)
    return rows


def target(workload):
    """The issue's target for a workload (issue 30, item 8)."""
    if workload.startswith("prefill"):
        return 1.0
    if workload.startswith("decode"):
        return 1.5
    return None  # S sequences: 8x one sequence, not a ratio to llama.cpp


def svg(rows, title):
    lo, hi = 0.1, 4.0  # the log axis, in ratio
    x0, width, bar, gap = 300, 460, 18, 8
    h = 90 + len(rows) * (bar + gap) + 40
    xs = lambda r: x0 + width * (math.log(max(min(r, hi), lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{x0 + width + 230}" height="{h}" '
           'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="24" font-size="15" font-weight="bold">{title}</text>',
           '<text x="10" y="44" fill="#555">bar: wisp tok/s / llama.cpp tok/s on a log scale (right of 1.0x: '
           'wisp faster); dashed: the target (decode 1.5x, prefill 1.0x)</text>']
    for r in (0.25, 0.5, 1.0, 2.0):
        x = xs(r)
        out.append(f'<line x1="{x:.1f}" y1="60" x2="{x:.1f}" y2="{h - 30}" stroke="{"#000" if r == 1 else "#ddd"}"/>')
        out.append(f'<text x="{x:.1f}" y="{h - 14}" text-anchor="middle" fill="#555">{r}x</text>')
    y = 70
    for row in rows:
        r = row["ratio"]
        label = f'{row["model"]}, {row["workload"]}'
        out.append(f'<text x="{x0 - 8}" y="{y + 13}" text-anchor="end">{label}</text>')
        a, b = sorted((xs(1.0), xs(r)))
        color = "#2ca02c" if r >= 1 else "#d62728"
        out.append(f'<rect x="{a:.1f}" y="{y}" width="{b - a:.1f}" height="{bar}" fill="{color}"/>')
        t = target(row["workload"])
        if t:
            xt = xs(t)
            out.append(f'<line x1="{xt:.1f}" y1="{y - 2}" x2="{xt:.1f}" y2="{y + bar + 2}" stroke="#000" '
                       'stroke-dasharray="3,2"/>')
        out.append(f'<text x="{x0 + width + 10}" y="{y + 13}">{r:.2f}x  ({row["wisp_tok_s"]:,.0f} vs '
                   f'{row["llama_cpp_tok_s"]:,.0f} tok/s)</text>')
        y += bar + gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot-attn-long.py RUN/summary.txt TITLE")
    path, title = sys.argv[1], sys.argv[2]
    rows = parse(path)
    if not rows:
        sys.exit(f"{path}: no receipt lines")
    base = path.rsplit("/", 1)[0] if "/" in path else "."
    with open(f"{base}/summary.json", "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    with open(f"{base}/ratio.svg", "w") as f:
        f.write(svg(rows, title))
    print(f"{base}/summary.json, {base}/ratio.svg: {len(rows)} rows")


if __name__ == "__main__":
    main()
