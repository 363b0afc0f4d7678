# Pool C re-measured with the no-skill guard (docs/ranking.md): gate-rank's calls only, on the stored GPU truth of
# 2026-11-30 (96 runs, commit 132f1d1; the current code keys them to the same experiments, checked on the CPU).
# Run on a warm host after `source .gpu/setup.sh` (a first call carrying [".gpu"]), carrying [".gpu3"]: .gpu3/whl
# holds the efficientnet_lite1 and lite2 weight wheels (the 64 MiB carry cannot hold them beside .gpu), .gpu3/c_truth.jsonl
# the truth's records. Four calls side by side, as in the first measurement's second round: v2's defaults with proxy
# seed 100 (registered), 101 and 102, and v1's rule with seed 100; copied to .gpu3/c3.sh for the run.
t0=$(date +%s)
PY=${PY:-python3}
. measurements/gpu/second_carry.sh .gpu3 "the first call"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1; git log --oneline -1 2>/dev/null
R=$PWD/gate_outputs/rv_c; mkdir -p "$R/results"
cp "${TRUTH:-.gpu3/c_truth.jsonl}" "$R/results/records.jsonl"
$PY measurements/rank_validation.py --root "$R" --pool C --seeds 3 --truth-only --workers 1 ${TINY:-} > "$OUT/truth.log" 2>&1
echo "truth exit $? ($(grep -o '[0-9]* experiments, [0-9]* already stored' "$OUT/truth.log"))"
calls=${CALLS:-"v2: v2_101:--proxy-seeds=101 v2_102:--proxy-seeds=102 first:proxy_benchmarks=first"}
. measurements/gpu/calls_side_by_side.sh
calls_side_by_side C "$R" $((t0 + ${DEADLINE:-360})) $calls
echo "calls: $(( $(date +%s) - t0 )) s"
