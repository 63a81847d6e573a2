#!/bin/bash
# runs A0/B2/llama rounds on Q4_0 and Q8_0 whenever the machine looks idle (2 s of >90% idle), up to 6 rounds or 15 min
out=/tmp/q40/quiet.txt; end=$((SECONDS+900)); n=0
idle() { read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ < /proc/stat; sleep 2; read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ < /proc/stat;
  busy=$(( (u2-u1)+(n2-n1)+(s2-s1)+(q2-q1)+(sq2-sq1)+(st2-st1) )); tot=$(( busy+(i2-i1)+(w2-w1) )); [ $((busy*100)) -lt $((tot*10)) ]; }
while [ $SECONDS -lt $end ] && [ $n -lt 6 ]; do
  if idle; then
    n=$((n+1)); f=$([ $((n%2)) -eq 1 ] && echo Q4_0 || echo Q8_0)
    echo "round $n $(date +%T) $(cat /proc/loadavg)" >> $out
    for b in A0 B2; do line=$(/tmp/q40/wisp-$b bench -m /tmp/g1/$f.gguf --backend cpu -t 2 -p 128 -n 64 -o /tmp/q40/r-$b.json --force 2>&1 | grep "^prefill:"); echo "$f $b $n $line" >> $out; done
    /tmp/llama.cpp-cpu/build/bin/llama-bench -m /tmp/g1/$f.nv.gguf -t 2 -p 128 -n 64 -r 1 -o md 2>&1 | grep gemma | sed "s/^/$f llama $n /" >> $out
  fi
done
echo finished >> $out
