#!/usr/bin/env bash
# The long fuzzing run recorded in docs/RELIABILITY.md: every target for its number of inputs,
# one after the other, from corpora seeded with the repository's own inputs (seed.sh).
#   fuzz/run.sh            the recorded run (about 20 million inputs)
#   SCALE=0.1 fuzz/run.sh  a tenth of it
# Needs nightly Rust and cargo-fuzz (`cargo install cargo-fuzz`). A crash stops the run and
# leaves its input in fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")"
./seed.sh
cargo +nightly fuzz build -O -s none
SCALE=${SCALE:-1}
bin=target/x86_64-unknown-linux-gnu/release
total=0
for spec in scenario_toml:4000000 sweep_toml:3000000 set_value:4000000 mooncake_jsonl:3000000 \
            azure_csv:3000000 measured_jsonl:2000000 scenario_run:1000000; do
    t=${spec%%:*}
    runs=$(python3 -c "print(int(${spec##*:} * $SCALE))")
    mkdir -p "artifacts/$t"
    start=$(date +%s)
    "$bin/$t" "corpus/$t" -runs="$runs" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 > "artifacts/$t/log" 2>&1
    end=$(date +%s)
    cov=$(grep -o 'cov: [0-9]*' "artifacts/$t/log" | tail -1)
    echo "$t: $runs inputs in $((end - start)) s, $cov, corpus $(ls "corpus/$t" | wc -l) files, no crash"
    total=$((total + runs))
done
echo "all targets: $total inputs, no crash, no timeout, no out-of-memory"
