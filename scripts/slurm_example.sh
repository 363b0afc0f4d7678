#!/usr/bin/env bash
# Run the GATE small tier for your encoder as a SLURM job array, from the cluster's login node.
# Edit the partition/account/setup lines for your cluster; the output root must be on a shared file system.
# Rerun the same command at any time: finished experiments are skipped, interrupted ones resume.
set -euo pipefail
cd "$(dirname "$0")/.."
ENCODER="${1:?usage: scripts/slurm_example.sh <encoder> [tier]}"
TIER="${2:-small}"
.venv/bin/gate-tier tier="$TIER" encoder="$ENCODER" launch=slurm \
  paths.root="${GATE_HOME:-$PWD/gate_outputs}" \
  launcher.partition=gpu launcher.gpus_per_node=1 launcher.cpus_per_task=8 launcher.mem_gb=32 \
  launcher.timeout_min=720 launcher.array_parallelism=16 \
  "launcher.setup=[\"source $PWD/.venv/bin/activate\"]"
