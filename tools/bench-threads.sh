#!/usr/bin/env bash
# The CPU thread pool on an idle and on a crowded machine (issue 31 item 4).
#
#   tools/bench-threads.sh [OUT.json]
#
# For each model (models/default when present, and the seed-shaped synthetic
# LFM2, generated under models/seed on first use) it runs `wisp bench`:
#   idle: the default thread count (-t 0) and every fixed count 1..nproc;
#   busy: with BUSY (default 2) `yes > /dev/null` loops running, -t 0 and -t 1.
# Runs are interleaved (one of each setting per round, ROUNDS rounds) so drift
# in the machine's load hits every setting alike; each setting's median
# decode tok/s is reported. The receipt (default bench/results/cpu-threads-
# HOST-DATE.json) records the load average before and after each phase, since
# "idle" is only as idle as the machine was, and the two targets:
#   idle: default >= 0.8 x the best fixed count;  busy: default >= 1 thread.
# Env: WISP (binary, default build/wisp), ROUNDS (5), PROMPT (32), DECODE (128),
#      BUSY (2), MODELS (space-separated model dirs, overriding the default list).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WISP:-build/wisp}
ROUNDS=${ROUNDS:-5}
PROMPT=${PROMPT:-32}
DECODE=${DECODE:-128}
BUSY=${BUSY:-2}
OUT=${1:-bench/results/cpu-threads-$(hostname -s)-$(date -u +%Y%m%d-%H%M).json}
[ -x "$W" ] || { echo "bench-threads: $W not found (make build/wisp)" >&2; exit 1; }
if [ -z "${MODELS:-}" ]; then
  MODELS=""
  [ -f models/default/manifest.json ] && MODELS="models/default"
  [ -f models/seed/manifest.json ] || "$W" gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --seed 1 >/dev/null
  MODELS="$MODELS models/seed"
fi
NCPU=$(nproc)
TMP=$(mktemp -d)
BUSY_PIDS=()
stop_busy() { for p in "${BUSY_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; BUSY_PIDS=(); }
trap 'stop_busy; rm -rf "$TMP"' EXIT

# one_run MODEL THREADS -> prints decode tok/s (or "null" when the run failed)
one_run() {
  local r="$TMP/r.json"
  if "$W" bench -m "$1" -p "$PROMPT" -n "$DECODE" -t "$2" -o "$r" --force >/dev/null 2>"$TMP/err"; then
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["decode"]["tok_per_s"])' "$r"
  else
    echo "bench-threads: $1 -t $2 failed: $(tail -1 "$TMP/err")" >&2
    echo null
  fi
}

# phase NAME MODEL SETTINGS... -> appends "phase model threads tok_s" lines to $TMP/runs
phase() {
  local name=$1 model=$2; shift 2
  echo "$name $model load_before $(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" >>"$TMP/load"
  for ((r = 0; r < ROUNDS; r++)); do
    for t in "$@"; do
      v=$(one_run "$model" "$t")
      echo "$name $model $t $v" >>"$TMP/runs"
      echo "bench-threads: $name $model -t $t: $v tok/s" >&2
    done
  done
  echo "$name $model load_after $(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" >>"$TMP/load"
}

touch "$TMP/runs" "$TMP/load"
UPTIME_START=$(uptime)
for m in $MODELS; do
  phase idle "$m" 0 $(seq 1 "$NCPU")
  for ((i = 0; i < BUSY; i++)); do yes >/dev/null & BUSY_PIDS+=($!); done
  sleep 1
  phase busy "$m" 0 1
  stop_busy
done
UPTIME_END=$(uptime)

python3 - "$TMP/runs" "$TMP/load" "$OUT" "$W" "$NCPU" "$BUSY" "$ROUNDS" "$PROMPT" "$DECODE" "$UPTIME_START" "$UPTIME_END" <<'PY'
import json, statistics, subprocess, sys, datetime, os
runs_f, load_f, out, wisp, ncpu, busy, rounds, prompt, decode, up0, up1 = sys.argv[1:12]
runs = {}
for line in open(runs_f):
    phase, model, t, v = line.split()
    if v != "null":
        runs.setdefault((phase, model, int(t)), []).append(float(v))
loads = {}
for line in open(load_f):
    phase, model, key, v = line.split()
    loads.setdefault(f"{phase} {model}", {})[key] = [float(x) for x in v.split(",")]
def med(k): return statistics.median(runs[k]) if k in runs else None
models = sorted({k[1] for k in runs})
result = {}
for m in models:
    idle = {t: med(("idle", m, t)) for (p, mm, t) in runs if p == "idle" and mm == m}
    fixed = {t: v for t, v in idle.items() if t > 0 and v is not None}
    best_t = max(fixed, key=fixed.get) if fixed else None
    d_idle, d_busy, one_busy = idle.get(0), med(("busy", m, 0)), med(("busy", m, 1))
    r_idle = d_idle / fixed[best_t] if d_idle and best_t else None
    r_busy = d_busy / one_busy if d_busy and one_busy else None
    result[m] = {
        "idle_median_tok_s": {str(t): v for t, v in sorted(idle.items())},
        "busy_median_tok_s": {"0": d_busy, "1": one_busy},
        "all_runs_tok_s": {f"{p} -t {t}": runs[(p, mm, t)] for (p, mm, t) in sorted(runs) if mm == m},
        "best_fixed_threads_idle": best_t,
        "idle_default_over_best_fixed": r_idle,
        "busy_default_over_one_thread": r_busy,
        "target_idle_met": r_idle is not None and r_idle >= 0.8,
        "target_busy_met": r_busy is not None and r_busy >= 1.0,
        "load_average": {k.split(" ", 1)[0]: v for k, v in loads.items() if k.split(" ", 1)[1] == m},
    }
try:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip() != ""
except OSError:
    commit, dirty = None, None
receipt = {
    "what": "wisp bench decode tok/s: default thread count vs fixed counts idle, and vs 1 thread beside busy loops",
    "command": "tools/bench-threads.sh",
    "wisp": wisp, "git_commit": commit, "git_dirty": dirty,
    "online_cpus": int(ncpu), "busy_loops": int(busy), "rounds": int(rounds),
    "prompt_tokens": int(prompt), "decode_tokens": int(decode),
    "uptime_start": up0, "uptime_end": up1,
    "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "models": result,
}
tmp = out + ".tmp"
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(tmp, "w") as f: json.dump(receipt, f, indent=1); f.write("\n")
os.replace(tmp, out)
for m, r in result.items():
    print(f"{m}: idle default/best fixed (-t {r['best_fixed_threads_idle']}) = {r['idle_default_over_best_fixed']}, "
          f"busy default/1 thread = {r['busy_default_over_one_thread']}")
print(f"receipt: {out}")
PY
