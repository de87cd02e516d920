#!/usr/bin/env bash
# Seeds each fuzz target's corpus from the repository's own inputs (bundled scenarios, sweeps,
# trace heads, a measured file). Run from anywhere; corpora go to fuzz/corpus/TARGET.
set -euo pipefail
cd "$(dirname "$0")"
root=..
mk() { mkdir -p "corpus/$1"; }
for t in scenario_toml sweep_toml set_value mooncake_jsonl azure_csv measured_jsonl scenario_run; do mk "$t"; done
cp "$root"/scenarios/*.toml corpus/scenario_toml/
cp "$root"/scenarios/{rr,kv,random,lossy-bus,late-events,events-on,events-off}.toml corpus/scenario_run/
cp "$root"/sweeps/*.toml corpus/sweep_toml/
i=0
for kv in 'cluster.kv_capacity_blocks=64' 'workload.speedup=2.0' 'router.policy=dynamo' \
          'bus.drop_rate=0.5' 'faults=[{kind="restart",worker=0,at_ms=1.0,down_ms=5.0}]' \
          'workload.prefixes=100' 'timing.model="fixed"' 'engine.vllm.max_num_seqs="unbounded"' \
          'router.dynamo.router_temperature=0.5' 'workload.kind="synthetic"'; do
    printf '%s' "$kv" > "corpus/set_value/$i"; i=$((i + 1))
done
# Trace targets: a selector byte (block size and skip_bad) and the first rows of a trace.
for sel in 0 1 5; do
    { printf "\\x0$sel"; head -n 20 "$root/data/traces/mooncake_conversation_trace.jsonl"; } > "corpus/mooncake_jsonl/conv-$sel"
    { printf "\\x0$sel"; head -n 20 "$root/data/traces/mooncake_synthetic_trace.jsonl"; } > "corpus/mooncake_jsonl/syn-$sel"
    { printf "\\x0$sel"; head -n 20 "$root/data/traces/azure_llm_inference_2023_conv.csv"; } > "corpus/azure_csv/conv-$sel"
done
cat > corpus/measured_jsonl/0 <<'JSONL'
{"mode":"agg","input":1500,"conc":1,"rep":0,"ttft_p50_ms":50.0}
{"mode":"disagg","input":1500,"conc":1,"rep":0,"ttft_p50_ms":300.0}
{"mode":"agg","input":1500,"conc":4,"rep":1,"ttft_p50_ms":61.5}
JSONL
echo "seeded $(find corpus -type f | wc -l) inputs"
