# Run from the project root on the GPU host (../shared/gpu/README.md: `bash ../shared/gpu/pack` fills .gpu/; carry
# [".gpu"]), with $OUT set; copied to .gpu/e1.sh for the run. Pool E, phase 1: install (.gpu/setup.sh), then the
# truth of the six encoders whose weights this carry holds (lite0 and the random-init ones); stops itself at
# DEADLINE seconds (phase 2 resumes from the store).
t0=$(date +%s)
PY=${PY:-python3}
[ -n "${SKIP_SETUP:-}" ] || source .gpu/setup.sh 2>&1 | tail -3
[ -n "${SKIP_SETUP:-}" ] || export PYTHONPATH="$PWD:/tmp/gate-site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
echo "cores $(nproc)"; git log --oneline -1 2>/dev/null
R=$PWD/gate_outputs/rv_e; mkdir -p "$R"
setsid $PY measurements/rank_validation.py --root "$R" --pool E --seeds 3 --truth-only --workers ${WORKERS:-8} ${TINY:-} \
  --encoders efficientnet_lite0 resnet18_scratch efficientnetv2_scratch vit_tiny_scratch vit_base_scratch flexivit_scratch \
  > "$OUT/truth1.log" 2>&1 &
pid=$!
deadline=$((t0 + ${DEADLINE:-300}))
while kill -0 $pid 2>/dev/null && [ "$(date +%s)" -lt $deadline ]; do sleep 2; done
if kill -0 $pid 2>/dev/null; then kill -TERM -- -$pid; sleep 8; kill -KILL -- -$pid 2>/dev/null; echo "phase 1 stopped at its deadline"; fi
wait $pid; echo "truth exit $?"
$PY -c "import json,sys; print(len({json.loads(l)['experiment'] for l in open(sys.argv[1])}), 'runs stored')" "$R/results/records.jsonl"
grep -iE "error|Traceback" "$OUT/truth1.log" | head -5
echo "phase 1: $(( $(date +%s) - t0 )) s"
