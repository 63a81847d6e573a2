#!/usr/bin/env python3
"""The batched step's tok/s against the sequences a step, as a plot.

    tools/plot-rows-i8.py DIR "TITLE" -> DIR/rows.svg

DIR holds the lines of bench/probes-h100.sh rowsi8 (rowsi8.txt) and of the
S = 16 / 24 runs beside them (s16.txt): "MODEL S N TUNING ... tokens_per_s:
X", and receipt/summary.txt (bench/attn-long-h200.sh) for llama.cpp's
S-sequence tok/s. One panel a model: wisp's default (rowsI8=1x16, as PICK
assembles it from the probe's runs), the paths before the int8 multi-row
product (rowsI8=0) and llama.cpp, tok/s on a log scale. Standard library only.
"""
import math
import re
import sys

RUN = re.compile(r"^(\S+)\s+S\s+(\d+)\s+(\S+)\s.*\"tokens_per_s\": ([\d.]+)")
LLAMA = re.compile(r"^(\S+)\s+(\d+) sequences a step\s+\d+\s+(\d+)\s")
NAMES = {"seed": "seed shape (LFM2, Q4)", "qwen08": "Qwen 3.5 0.8B (Q4_K)", "qwen2b": "Qwen 3.5 2B (Q4_K)"}
SERIES = [("default", "wisp, int8 rows 1..16 (default)", "#1f77b4"), ("before", "wisp before (rowsI8=0)", "#ff7f0e"),
          ("llama", "llama.cpp CUDA", "#2ca02c")]
# Which run stands for each series at S: the default (rowsI8=1x16) is the
# probe's rowsI8=1x64 at S = 1, its untuned run at 2..16 (then 2x32) and
# the int8 prefill path beyond 16 (rowsI8=2x16 at 24, rowsI8=0 at 32, 64);
# before is rowsI8=0, and the untuned run at S = 1 (then the one-row product).
PICK = {"default": lambda s: "rowsI8=1x64" if s == 1 else "none" if s <= 16 else "rowsI8=2x16" if s == 24 else "rowsI8=0",
        "before": lambda s: "none" if s == 1 else "rowsI8=0"}


def read(d):
    pts = {}
    for name in ("rowsi8.txt", "s16.txt"):
        try:
            with open(f"{d}/{name}") as f:
                for line in f:
                    m = RUN.match(line)
                    if m:
                        pts.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = float(m.group(4))
        except FileNotFoundError:
            pass
    with open(f"{d}/receipt/summary.txt") as f:
        for line in f:
            m = LLAMA.match(line)
            if m:
                model = "seed" if m.group(1) == "seedlong" else m.group(1)
                pts.setdefault(model, {}).setdefault("llama", {})[int(m.group(2))] = float(m.group(3))
    return pts


def main():
    d, title = sys.argv[1], sys.argv[2]
    pts = read(d)
    models = [m for m in NAMES if m in pts]
    pw, ph, ml, mt, mb = 300, 240, 60, 50, 60
    w, h = ml + len(models) * (pw + 30), mt + ph + mb
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>']
    for i, m in enumerate(models):
        x0 = ml + i * (pw + 30)
        ys = [v for s in pts[m].values() for v in s.values()]
        lo, hi = math.log10(min(ys) * 0.8), math.log10(max(ys) * 1.25)
        sx = lambda s: x0 + pw * math.log2(s) / 6.0
        sy = lambda v: mt + ph - ph * (math.log10(v) - lo) / (hi - lo)
        out.append(f'<rect x="{x0}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{x0 + pw / 2}" y="{mt - 8}" text-anchor="middle">{NAMES[m]}</text>')
        for s in (1, 2, 4, 8, 16, 32, 64):
            out.append(f'<text x="{sx(s):.1f}" y="{mt + ph + 14}" text-anchor="middle">{s}</text>')
        out.append(f'<text x="{x0 + pw / 2}" y="{mt + ph + 30}" text-anchor="middle">sequences a step (S)</text>')
        for e in range(int(math.floor(lo)), int(math.ceil(hi)) + 1):
            for k in (1, 2, 5):
                v = k * 10 ** e
                if lo <= math.log10(v) <= hi:
                    y = sy(v)
                    out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
                    if i == 0 or k == 1:
                        out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        for key, label, color in SERIES:
            if key in PICK:  # each S from the run that stands for it
                s = {k: pts[m][PICK[key](k)][k] for k in range(1, 65) if k in pts[m].get(PICK[key](k), {})}
            else:
                s = pts[m].get(key, {})
            xy = [(sx(k), sy(v)) for k, v in sorted(s.items())]
            if len(xy) > 1:
                out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                           (color, " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)))
            for a, b in xy:
                out.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"/>')
    for j, (key, label, color) in enumerate(SERIES):
        y = h - 14
        x = ml + j * 220
        out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 16}" y="{y}">{label}</text>')
    out.append(f'<text x="14" y="{mt + ph / 2}" transform="rotate(-90 14 {mt + ph / 2})" '
               'text-anchor="middle">aggregate tok/s (log)</text>')
    out.append("</svg>")
    with open(f"{d}/rows.svg", "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"{d}/rows.svg: {len(models)} models")


if __name__ == "__main__":
    main()
