# Sourced by the pool scripts beside it: gate-rank calls side by side on copies of a stored truth's records.
# calls_side_by_side POOL ROOT DEADLINE_EPOCH CALL...: each CALL is NAME:ARG (ARG a gate-rank override, or
# --proxy-seeds=S), run by rank_validation.py in ROOT_NAME; a call still running at DEADLINE_EPOCH is stopped and
# reported unfinished; logs, reports and records go to $OUT. Needs $PY and $OUT.
calls_side_by_side() {
  local pool=$1 R=$2 deadline=$3; shift 3
  local calls="$*" pids="" call name arg extra variant p
  $PY - "$R" $calls <<'PY'
import shutil, sys
r = sys.argv[1]
for call in sys.argv[2:]:
    shutil.copytree(r, f"{r}_{call.split(':')[0]}", ignore=shutil.ignore_patterns("runs", "csv_logs", "tmp", "wandb", "reports"),
                    dirs_exist_ok=True)
PY
  for call in $calls; do
    name=${call%%:*}; arg=${call#*:}
    case "$arg" in --proxy-seeds=*) extra="--proxy-seeds ${arg#--proxy-seeds=}"; variant="";; *) extra=""; variant="$arg";; esac
    setsid $PY measurements/rank_validation.py --root "${R}_$name" --pool "$pool" --seeds 3 --workers 1 ${TINY:-} $extra \
      --variant "$variant" > "$OUT/call_$name.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do
    while kill -0 $p 2>/dev/null && [ "$(date +%s)" -lt $deadline ]; do sleep 2; done
    if kill -0 $p 2>/dev/null; then kill -TERM -- -$p; echo "call $p stopped at the deadline (unfinished)"; fi
  done
  wait
  for call in $calls; do name=${call%%:*}; mkdir -p "$OUT/reports_$name"; cp -r "${R}_$name"/reports/rank-* "$OUT/reports_$name/" 2>/dev/null
    cp "${R}_$name/results/records.jsonl" "$OUT/records_$name.jsonl"; grep -h "gate-rank:\|^\[.*exit" "$OUT/call_$name.log" | tail -2; done
}
