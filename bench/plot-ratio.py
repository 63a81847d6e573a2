#!/usr/bin/env python3
"""Plots a wisp-against-llama.cpp summary (bench/attn-long-h200.sh's
summary.json: rows of model, workload, wisp_tok_s, llama_cpp_tok_s) as one
SVG: a horizontal bar per workload, its length wisp / llama.cpp, with the
1.0x line and each row's two speeds written beside it. Rows where either
side is missing are listed as such. Standard library only.

    bench/plot-ratio.py [--title T] SUMMARY.json OUT.svg
"""
import json
import sys

ROW_H, LEFT, BAR_W, RIGHT = 26, 250, 420, 260


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def main(argv):
    title = "wisp / llama.cpp, same weights, one H200"
    if len(argv) > 2 and argv[0] == "--title":
        title, argv = argv[1], argv[2:]
    if len(argv) != 2:
        sys.exit(__doc__.strip())
    with open(argv[0]) as f:
        rows = json.load(f)["rows"]
    hi = max([2.0] + [r["wisp_tok_s"] / r["llama_cpp_tok_s"] for r in rows
                      if r.get("wisp_tok_s") and r.get("llama_cpp_tok_s")])
    scale = BAR_W / hi
    top = 60
    height = top + ROW_H * len(rows) + 40
    width = LEFT + BAR_W + RIGHT
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
           % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>' % (10, esc(title)),
           '<text x="%d" y="44" fill="#555">bar: wisp tok/s divided by llama.cpp tok/s (longer is faster for wisp)</text>' % 10]
    for i, r in enumerate(rows):
        y = top + i * ROW_H
        out.append('<text x="%d" y="%d" text-anchor="end">%s, %s</text>' % (LEFT - 8, y + 16, esc(r["model"]),
                                                                           esc(r["workload"])))
        w, l = r.get("wisp_tok_s"), r.get("llama_cpp_tok_s")
        if not w or not l:
            why = "wisp refused (beyond the artifact's context)" if l and not w else "no llama.cpp number"
            out.append('<text x="%d" y="%d" fill="#888">%s</text>' % (LEFT + 4, y + 16, why))
            continue
        ratio = w / l
        color = "#2ca02c" if ratio >= 1.0 else "#d62728"
        out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (LEFT, y + 4, ratio * scale,
                                                                             ROW_H - 8, color))
        out.append('<text x="%d" y="%d">%.2fx  (%.0f vs %.0f tok/s)</text>' % (LEFT + BAR_W + 8, y + 16, ratio, w, l))
    x1 = LEFT + scale
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/>' %
               (x1, top - 4, x1, top + ROW_H * len(rows)))
    out.append('<text x="%.1f" y="%d" text-anchor="middle">1.0x</text>' % (x1, top + ROW_H * len(rows) + 16))
    out.append("</svg>")
    with open(argv[1], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
