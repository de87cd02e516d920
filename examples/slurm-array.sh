#!/usr/bin/env bash
# A dynsim sweep across a Slurm cluster: one shard per array task, then one merge.
#
#   sbatch --array=0-7 examples/slurm-array.sh                       # 8 shards
#   sbatch --dependency=afterok:<the array's job id> examples/slurm-array.sh merge
#
# The shard is the task's place in the array, SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, and
# the shard count SLURM_ARRAY_TASK_COUNT, so an array may start anywhere (--array=1-8 works
# too); it must be a plain range (no :step, no list), whose IDs are consecutive.
#
# Every point of a sweep is deterministic, so the merged folder equals an unsharded
# `dynsim sweep` byte for byte (results.json, results.csv and the plots). Settings, from the
# environment (sbatch --export=...):
#   SWEEP   the sweep file (default sweeps/routers.toml)
#   OUT     the output folder shared by the tasks (default sweep-out); shards go to OUT/shard-I,
#           the merge to OUT/merged
#   DYNSIM  the dynsim binary (default: dynsim on PATH; `cargo install --path .` puts it there)
#SBATCH --job-name=dynsim-sweep
#SBATCH --cpus-per-task=4
#SBATCH --time=02:00:00
#SBATCH --output=dynsim-sweep-%A_%a.log
set -euo pipefail

SWEEP=${SWEEP:-sweeps/routers.toml}
OUT=${OUT:-sweep-out}
DYNSIM=${DYNSIM:-dynsim}

if [[ "${1:-shard}" == "merge" ]]; then
    exec "$DYNSIM" merge "$OUT"/shard-* --out "$OUT/merged"
fi

ID=${SLURM_ARRAY_TASK_ID:?"run as an array job: sbatch --array=0-N"}
MIN=${SLURM_ARRAY_TASK_MIN:?"run as an array job: sbatch --array=0-N"}
COUNT=${SLURM_ARRAY_TASK_COUNT:?"run as an array job: sbatch --array=0-N"}
INDEX=$((ID - MIN))
exec "$DYNSIM" sweep "$SWEEP" --shard "$INDEX/$COUNT" --jobs "${SLURM_CPUS_PER_TASK:-1}" \
    --out "$OUT/shard-$INDEX"
