#!/usr/bin/env bash
# How wisp's CPU backend scales with threads: `wisp bench --backend cpu
# --op-times` on one model at each thread count, then tok/s per count and
# each op kind's time per token, so that an op which stops scaling (a
# serial part, a barrier, a bandwidth limit) shows as the row whose time
# stays flat while the others shrink.
#
#   tools/cpu-scaling.sh MODEL_DIR [OUT_DIR]
#
# Environment: THREADS (default "1 2 4 8 16"), PROMPT (128), DECODE (64),
# PROFILE (throughput: the int8 products; "default" for the exact ones),
# REPS (3: per count, the fastest round of each phase is kept), WISP
# (build/wisp), TUNING (wisp's --tuning keys, e.g. prefillChunk=128;
# default none). OUT_DIR (default /tmp/wisp-cpu-scaling) keeps every
# receipt (JSON, with the op times under prefill.op_times and
# decode.op_times) and the printed tables as scaling.txt.
set -uo pipefail
if [ $# -lt 1 ]; then
  sed -n "2,16p" "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
MODEL=$1
OUT=${2:-/tmp/wisp-cpu-scaling}
cd "$(dirname "$0")/.."
WISP=${WISP:-build/wisp}
THREADS=${THREADS:-1 2 4 8 16}
PROMPT=${PROMPT:-128}
DECODE=${DECODE:-64}
PROFILE=${PROFILE:-throughput}
REPS=${REPS:-3}
TUNING=${TUNING:-}
TUNING_ARGS=()
[ -n "$TUNING" ] && TUNING_ARGS=(--tuning "$TUNING")
[ -x "$WISP" ] || { echo "cpu-scaling: $WISP is missing (make first)" >&2; exit 2; }
[ -f "$MODEL/manifest.json" ] || { echo "cpu-scaling: $MODEL/manifest.json is missing" >&2; exit 2; }
mkdir -p "$OUT" || exit 2
for t in $THREADS; do
  for r in $(seq 1 "$REPS"); do
    echo "cpu-scaling: threads $t round $r" >&2
    "$WISP" bench -m "$MODEL" --backend cpu --profile "$PROFILE" ${TUNING_ARGS[@]+"${TUNING_ARGS[@]}"} -t "$t" -p "$PROMPT" -n "$DECODE" --op-times \
      -o "$OUT/t$t-r$r.json" --force > "$OUT/t$t-r$r.log" 2>&1 ||
      { echo "cpu-scaling: wisp bench failed: $(tail -1 "$OUT/t$t-r$r.log")" >&2; exit 1; }
  done
done
python3 - "$OUT" "$REPS" $THREADS <<'EOF' | tee "$OUT/scaling.txt"
import glob, json, sys
out, reps, threads = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3:]]
best = {}
for t in threads:
    rs = [json.load(open(f)) for f in sorted(glob.glob("%s/t%d-r*.json" % (out, t)))]
    # per phase, the round that phase was fastest in
    best[t] = {ph: max(rs, key=lambda r: r[ph]["tok_per_s"]) for ph in ("prefill", "decode")}
r0 = best[threads[0]]["decode"]
print("model %s, profile %s, prompt %d, decode %d, best of %d rounds" %
      (r0["model"]["dir"], r0["profile"], r0["prompt_tokens"], r0["decode_tokens"], reps))
base = threads[0]
print("%8s %12s %8s %12s %8s %10s" % ("threads", "prefill t/s", "scale", "decode t/s", "scale", "dec GB/s"))
for t in threads:
    p, d = best[t]["prefill"]["prefill"], best[t]["decode"]["decode"]
    p0, d0 = best[base]["prefill"]["prefill"], best[base]["decode"]["decode"]
    print("%8d %12.1f %8.2f %12.1f %8.2f %10.1f" % (t, p["tok_per_s"], p["tok_per_s"] / p0["tok_per_s"],
          d["tok_per_s"], d["tok_per_s"] / d0["tok_per_s"], d.get("achieved_GB_per_s", 0)))
for ph in ("prefill", "decode"):
    print("\n%s: microseconds per token of each op kind (share of the phase)" % ph)
    ops = []
    for t in threads:
        for o in best[t][ph][ph].get("op_times", []):
            if o["op"] not in ops: ops.append(o["op"])
    print("%-22s" % "op" + "".join("%16s" % ("t=%d" % t) for t in threads))
    def row(name, get):
        print("%-22s" % name + "".join(get(t) for t in threads))
    for op in ops + ["(outside ops)", "(phase)"]:
        def cell(t, op=op):
            r = best[t][ph]
            n = r["prompt_tokens"] if ph == "prefill" else r["decode_tokens"]
            total = r[ph]["seconds"]
            if op == "(phase)": s = total
            elif op == "(outside ops)": s = total - sum(o["seconds"] for o in r[ph].get("op_times", []))
            else: s = sum(o["seconds"] for o in r[ph].get("op_times", []) if o["op"] == op)
            return "%9.1f (%3.0f%%)" % (1e6 * s / max(n, 1), 100 * s / total if total > 0 else 0)
        row(op, cell)
EOF
echo "receipts and scaling.txt: $OUT" >&2
