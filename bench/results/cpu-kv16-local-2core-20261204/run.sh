p=$1; R=$2
for r in $(seq 1 $R); do
  for cfg in main-f32 kv16-f32 kv16-f16; do
    bin=/work/wt-kv/build/wisp; [ $cfg = main-f32 ] && bin=/tmp/kvmain/build/wisp  # main at f9df4f9, built from git archive
    kv=${cfg#*-}
    uptime | sed 's/.*load/load/' > bench/results/cpu-kv16-local-2core-20261204/$cfg-p$p-r$r.load
    tun="--tuning kv=$kv"; [ $cfg = main-f32 ] && tun=""
    (cd /work/wt-kv && $bin bench -m /work/main/models/synthetic-seed --backend cpu --profile throughput -t 2 -p $p -n 64 --op-times \
      $tun -o bench/results/cpu-kv16-local-2core-20261204/$cfg-p$p-r$r.json --force > /tmp/kvb3/$cfg-p$p-r$r.log 2>&1)
  done
done
