#!/usr/bin/env python3
"""Renders train.py's loss CSV (step, seconds, tokens, lr, train_loss, val_loss)
as a small SVG written with the standard library only:

    plot_loss.py loss.csv docs/default-model-loss.svg [--title TEXT]

Training loss is the blue line, validation loss the orange dots; the x axis
is the step, the y axis the loss in nats per token.
"""
import argparse
import csv
import math
from xml.sax.saxutils import escape

W, H = 640, 360
L, R, T, B = 60, 20, 30, 45  # margins


def read(path):
    train, val = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = int(row["step"])
            if row.get("train_loss"):
                train.append((step, float(row["train_loss"])))
            if row.get("val_loss"):
                val.append((step, float(row["val_loss"])))
    return train, val


def nice_ticks(lo, hi, n=5):
    span = hi - lo if hi > lo else 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi + 1e-9:
        out.append(round(t, 10))
        t += step
    return out


def svg(train, val, title):
    pts = train + val
    if not pts:
        raise SystemExit("plot_loss.py: the CSV has no loss values")
    x0, x1 = 0, max(p[0] for p in pts)
    ys = sorted(p[1] for p in pts)
    y0 = ys[0]
    y1 = ys[min(len(ys) - 1, int(0.98 * len(ys)))]  # the first steps' loss would flatten the rest
    y1 = max(y1, y0 + 1e-3)
    y0, y1 = y0 - 0.05 * (y1 - y0), y1 + 0.05 * (y1 - y0)

    def sx(x):
        return L + (x - x0) / max(1, x1 - x0) * (W - L - R)

    def sy(y):
        y = min(max(y, y0), y1)
        return T + (y1 - y) / (y1 - y0) * (H - T - B)

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="sans-serif" font-size="11">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="13">%s</text>' % (L, escape(title))]
    for t in nice_ticks(y0, y1):
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, sy(t), W - R, sy(t)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (L - 6, sy(t) + 4, t))
    for t in nice_ticks(x0, x1):
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (sx(t), T, sx(t), H - B))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (sx(t), H - B + 16, t))
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>' % (L, T, W - L - R, H - T - B))
    o.append('<text x="%d" y="%d" text-anchor="middle">step</text>' % ((L + W - R) // 2, H - 8))
    o.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">loss (nats/token)</text>' % (
        (T + H - B) // 2, (T + H - B) // 2))
    if train:
        o.append('<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>' % " ".join(
            "%.1f,%.1f" % (sx(x), sy(y)) for x, y in train))
    for x, y in val:
        o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="#ff7f0e"/>' % (sx(x), sy(y)))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f77b4" stroke-width="2"/>' % (W - 170, T + 14, W - 150, T + 14))
    o.append('<text x="%d" y="%d">train</text>' % (W - 145, T + 18))
    o.append('<circle cx="%d" cy="%d" r="3" fill="#ff7f0e"/>' % (W - 95, T + 14))
    o.append('<text x="%d" y="%d">validation</text>' % (W - 85, T + 18))
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("out")
    ap.add_argument("--title", default="wisp default model: training loss")
    args = ap.parse_args()
    train, val = read(args.csv)
    with open(args.out, "w") as f:
        f.write(svg(train, val, args.title))
    print("plot_loss.py: %d train points, %d validation points -> %s" % (len(train), len(val), args.out))


if __name__ == "__main__":
    main()
