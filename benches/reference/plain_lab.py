# A plain Python version of the lab's kv mode (chained block hashes with hashlib, a dict index),
# for the whole-process comparison in docs/BENCHMARKS.md.
import random, sys, json, hashlib, struct
def block_hashes(tokens, block):
    out, parent = [], b""
    for i in range(len(tokens) // block):
        h = hashlib.blake2b(parent + struct.pack(f"<{block}I", *tokens[i*block:(i+1)*block]), digest_size=8).digest()
        out.append(h); parent = h
    return out
def main(workers=16, prefixes=500, reps=20, plen=2048, tail=64, seed=1, block=16):
    r = random.Random(seed)
    order = [k for k in range(prefixes) for _ in range(reps)]
    r.shuffle(order)
    index = {}; routed = [0]*workers; seen = set(); processed = [set() for _ in range(workers)]
    hits = rep = 0
    for i, k in enumerate(order):
        toks = [k*1000+j for j in range(plen)] + [1_000_000+i*100+j for j in range(tail)]
        hs = block_hashes(toks, block)
        active = set(range(workers)); depth = 0
        for h in hs:
            holders = index.get(h)
            if not holders: break
            nxt = active & holders
            if not nxt: break
            active = nxt; depth += 1
        w = min(active, key=lambda x: (routed[x], x)) if depth else min(range(workers), key=lambda x: (routed[x], x))
        routed[w] += 1
        for h in hs: index.setdefault(h, set()).add(w)
        if k in seen:
            rep += 1
            hits += k in processed[w]
        seen.add(k); processed[w].add(k)
    print(json.dumps({"mode":"kv","workers":workers,"requests":len(order),"repeat_requests":rep,"hits":hits,"hit_rate":round(hits/rep,4) if rep else 0.0}))
main()
