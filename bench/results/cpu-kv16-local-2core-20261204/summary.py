import json, glob, sys, statistics as st, collections
d = sys.argv[1] if len(sys.argv) > 1 else 'bench/results/cpu-kv16-local-2core-20261204'
rows = collections.defaultdict(list)
loads = dict(l.split(' ', 1) for l in open(d + '/load-before-each-run.txt').read().splitlines())
loads = {k: v.strip() for k, v in loads.items()}
for f in sorted(glob.glob(d + '/*-r*.json')):
    r = json.load(open(f))
    def att(ph):
        for o in r[ph].get('op_times', []):
            if o['op'] == 'attention': return o['seconds'], o['calls']
        return 0, 1
    name = f.split('/')[-1][:-5]
    cfg = name.rsplit('-r', 1)[0]
    pa, pc = att('prefill'); da, dc = att('decode')
    rows[cfg].append((r['prefill']['tok_per_s'], 1e6 * pa / r['prompt_tokens'], r['decode']['tok_per_s'], 1e6 * da / r['decode_tokens'], 1e6 * da / dc, r.get('kv_dtype', '-')))
    print("%-18s kv=%s prefill %6.1f tok/s, attention %6.0f us/token | decode %5.1f tok/s, attention %5.0f us/token (%4.0f us/call) | %s" % ((name, rows[cfg][-1][5]) + rows[cfg][-1][:5] + (loads.get(name, ''),)))
print()
print("%-14s %10s %12s %10s %12s   (median [best] of rounds)" % ("config", "prefill t/s", "pf attn us/t", "decode t/s", "dec attn us/t"))
for cfg, v in sorted(rows.items()):
    def m(i, best): 
        xs = [x[i] for x in v]; return "%.0f [%.0f]" % (st.median(xs), best(xs))
    print("%-14s %14s %14s %12s %14s  n=%d" % (cfg, m(0, max), m(1, min), m(2, max), m(3, min), len(v)))
