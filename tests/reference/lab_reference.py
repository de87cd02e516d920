# Reference implementation of the lab in plain Python (CPython random.Random), used to generate
# the expected values in tests/lab_parity.rs:  python3 tests/reference/lab_reference.py
# Names are prefix tuples instead of hashes: overlap only depends on prefix equality.
import random, json, sys
def sim(mode, publish, workers, prefixes, reps, plen, tail, seed, block):
    r = random.Random(seed)
    order = [k for k in range(prefixes) for _ in range(reps)]
    r.shuffle(order)
    seen=set(); processed=[set() for _ in range(workers)]
    cached=[set() for _ in range(workers)]; routed=[0]*workers
    hits=rep=0
    for i,k in enumerate(order):
        toks=[k*1000+j for j in range(plen)]+[1_000_000+i*100+j for j in range(tail)]
        nb=len(toks)//block
        names=[tuple(toks[:(b+1)*block]) for b in range(nb)]
        if mode=='rr': w=i%workers
        elif mode=='random': w=r.randrange(workers)
        else:
            best=None
            for cand in range(workers):
                ov=0
                for n in names:
                    if n in cached[cand]: ov+=1
                    else: break
                key=(-ov, routed[cand], cand)
                if best is None or key<best: best=key
            w=best[2]; routed[w]+=1
            if mode=='kv' or publish: cached[w].update(names)
        if k in seen:
            rep+=1
            if k in processed[w]: hits+=1
        seen.add(k); processed[w].add(k)
    return dict(hits=hits, repeat_requests=rep, requests=len(order))
rng = random.Random(42)
cases=[]
for _ in range(40):
    p=dict(workers=rng.randint(1,6), prefixes=rng.randint(1,15), reps=rng.randint(1,7), plen=rng.choice([0,8,16,40,96]), tail=rng.choice([0,5,16,33]), seed=rng.randint(0,2**40), block=rng.choice([1,4,16]))
    for mode,pub in [('rr',True),('random',True),('kv',True),('kv-events',True),('kv-events',False)]:
        out=sim(mode,pub,**p)
        cases.append((mode,pub,p,out))
for mode,pub,p,o in cases:
    print(f'    ("{mode}", {str(pub).lower()}, [{p["workers"]}, {p["prefixes"]}, {p["reps"]}, {p["plen"]}, {p["tail"]}, {p["block"]}], {p["seed"]}, [{o["requests"]}, {o["repeat_requests"]}, {o["hits"]}]),')
