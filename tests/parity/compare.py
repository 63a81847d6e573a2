#!/usr/bin/env python3
"""compare.py REF.json WISP.json [--tol=1e-3]

Both files: {"logits": [[...], ...], "greedy": [...]} (hf_reference.py and
`wisp logits`). Prints, per prompt, max|diff| / max|ref logit| and whether the
greedy tokens are identical (first divergence index otherwise). Exits 1 if
any ratio exceeds the tolerance or the tokens differ, 2 on unusable input.
Standard library only (no numpy), so it also runs where wisp is built.
"""
import json
import math
import sys


def load(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        print("compare.py: %s: %s" % (path, e), file=sys.stderr)
        sys.exit(2)
    if not isinstance(d.get("logits"), list) or not isinstance(d.get("greedy"), list):
        print("compare.py: %s: needs 'logits' and 'greedy' arrays" % path, file=sys.stderr)
        sys.exit(2)
    return d


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--tol")]
    tol = 1e-3
    for a in argv[1:]:
        if a.startswith("--tol="):
            tol = float(a.split("=", 1)[1])
    if len(args) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ref, got = load(args[0]), load(args[1])
    ok = True
    if len(ref["logits"]) != len(got["logits"]):
        print("prompt count differs: %d reference, %d wisp" % (len(ref["logits"]), len(got["logits"])))
        return 1
    print("%-7s %8s %12s %12s %10s  %s" % ("prompt", "vocab", "max|diff|", "max|ref|", "ratio", "ok"))
    worst = 0.0
    for i, (a, b) in enumerate(zip(ref["logits"], got["logits"])):
        if len(a) != len(b) or not a:
            print("%-7d vocab differs: %d vs %d" % (i, len(a), len(b)))
            ok = False
            continue
        bad = any(x is None or y is None or not math.isfinite(x) or not math.isfinite(y) for x, y in zip(a, b))
        maxdiff = max(abs(x - y) for x, y in zip(a, b)) if not bad else float("inf")
        maxref = max(abs(x) for x in a) if not bad else 0.0
        ratio = maxdiff / maxref if maxref > 0 else float("inf")
        worst = max(worst, ratio)
        good = ratio <= tol
        ok = ok and good
        print("%-7d %8d %12.4g %12.4g %10.3g  %s" % (i, len(a), maxdiff, maxref, ratio, "yes" if good else "NO"))
    rg, gg = ref["greedy"], got["greedy"]
    first = next((i for i in range(min(len(rg), len(gg))) if rg[i] != gg[i]), None)
    if first is None and len(rg) == len(gg):
        print("greedy: %d tokens identical" % len(rg))
    elif first is None:
        print("greedy: lengths differ (%d reference, %d wisp)" % (len(rg), len(gg)))
        ok = False
    else:
        margin = ref.get("greedy_min_margin")
        print("greedy: first divergence at index %d (reference %d, wisp %d)%s" % (
            first, rg[first], gg[first], "" if margin is None else "; reference min top-2 margin %.3g" % margin))
        ok = False
    print("worst ratio %.3g (tolerance %.1g): %s" % (worst, tol, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
