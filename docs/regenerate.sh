#!/usr/bin/env bash
# Rebuilds every artefact under docs/ that a command writes (sweeps, plans, comparisons), with
# the commands the README and docs/*.md give for them. Run from anywhere; takes a few minutes on
# two cores with a release build.
#
#   docs/regenerate.sh            rebuild everything (builds the release binary first)
#   docs/regenerate.sh --check    fast (about 15 s), for .ci/run: re-render every sweep's
#                                 files from its results.json (merge writes exactly what sweep
#                                 writes), re-run the first point of the router-replicas sweep
#                                 and the timeline plots of scenarios/burst-threshold.toml and
#                                 scenarios/scale-up-reuse.toml,
#                                 with the debug binary, and fail if anything differs from the
#                                 committed files
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"

if [[ "${1:-}" == "--check" ]]; then
    cargo build --quiet
    dynsim="$target/debug/dynsim"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    status=0
    for dir in docs/sweeps/*/; do
        name="$(basename "$dir")"
        "$dynsim" merge "$dir" --out "$tmp/$name" > /dev/null
        if ! diff -r -q "$dir" "$tmp/$name"; then
            echo "docs/regenerate.sh --check: $dir differs from what today's code renders from its results.json; run docs/regenerate.sh" >&2
            status=1
        fi
    done
    "$dynsim" sweep sweeps/router-replicas.toml --shard 0/12 --out "$tmp/point0" --progress never > /dev/null
    if [[ "$(sed -n 2p "$tmp/point0/results.csv")" != "$(sed -n 2p docs/sweeps/router-replicas/results.csv)" ]]; then
        echo "docs/regenerate.sh --check: the first point of sweeps/router-replicas.toml no longer gives docs/sweeps/router-replicas/results.csv's first row; run docs/regenerate.sh" >&2
        status=1
    fi
    for timeline in burst-threshold scale-up-reuse; do
        "$dynsim" run "scenarios/$timeline.toml" --timeline-plot "$tmp/$timeline.svg" > /dev/null
        if ! cmp -s "$tmp/$timeline.svg" "docs/timeline/$timeline.svg"; then
            echo "docs/regenerate.sh --check: scenarios/$timeline.toml no longer draws docs/timeline/$timeline.svg; run docs/regenerate.sh" >&2
            status=1
        fi
    done
    exit "$status"
fi

cargo build --release --quiet
dynsim="$target/release/dynsim"
for sweep in routers event-gaps router-replicas routing-vs-workers kv-tiers; do
    "$dynsim" sweep "sweeps/$sweep.toml" --out "docs/sweeps/$sweep" --progress never
done
"$dynsim" plan data/traces/mooncake_synthetic_trace.jsonl --scenario scenarios/dynamo-mocker.toml \
    --sla 'ttft_p90_ms<=1000' --sla 'tpot_p50_ms<=40' --policy rr --policy least-loaded \
    --policy dynamo --policy sglang --policy kv-events --workers 1..16 --load 2 \
    --out docs/plan/synthetic-2x --progress never
"$dynsim" plan data/traces/mooncake_synthetic_trace.jsonl --scenario scenarios/dynamo-mocker.toml \
    --sla 'ttft_p90_ms<=1000' --sla 'tpot_p50_ms<=40' --policy rr --policy least-loaded \
    --policy dynamo --policy sglang --policy kv-events --workers 4 --load 1..4 \
    --out docs/plan/synthetic-4-workers --progress never
"$dynsim" plan data/traces/mooncake_conversation_trace.jsonl --scenario scenarios/qwen3-32b-fp8-h100.toml \
    --sla 'ttft_p90_ms<=1000' --policy rr --policy dynamo --workers 1..16 \
    --out docs/plan/qwen3-32b-h100 --progress never
"$dynsim" calibrate data/measurements/aic_silicon_dense_agg_train.csv --check \
    --predictions docs/fidelity/predictions.csv --plots docs/fidelity --progress never > /dev/null
"$dynsim" compare scenarios/dynamo-mocker.toml scenarios/event-gaps.toml --set workload.speedup=2.0 \
    --set 'router.on_gap="ignore"' --out docs/compare/lost-events --progress never
mkdir -p docs/timeline
for timeline in burst-threshold scale-up-reuse; do
    "$dynsim" run "scenarios/$timeline.toml" --timeline-plot "docs/timeline/$timeline.svg" > /dev/null
done
