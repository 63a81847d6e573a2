#!/bin/bash
# A (main 1100af3) vs B (branch q8k) alternated, then llama-bench on the same files
out=/tmp/q8k/ab-p128-n64.txt; : > $out
for f in q6k Q3_K.pure Q2_K.pure Q2_K q4km Q5_K_M; do
  for round in 1 2 3; do
    for b in A B; do
      line=$(/tmp/q8k/wisp-$b bench -m /tmp/g1/$f.gguf --backend cpu -t 2 -p 128 -n 64 -o /tmp/q8k/r.json --force 2>&1 | grep "^prefill:")
      echo "$f $b $round $line" >> $out
    done
  done
done
lb=llama-bench.txt; : > $lb
for f in q6k Q3_K.pure Q2_K.pure Q2_K q4km Q5_K_M; do
  echo "== $f" >> $lb
  /tmp/llama.cpp-cpu/build/bin/llama-bench -m /tmp/g1/$f.nv.gguf -t 2 -p 128 -n 64 -r 3 -o md >> $lb 2>&1
done
echo done >> $out
