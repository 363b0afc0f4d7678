# Sourced by a second device call on a still-warm host: `. measurements/gpu/second_carry.sh CARRY WHAT` — the first
# call's install (/tmp/gate-site, WHAT names that call) must still be there; CARRY/whl's wheels go to /tmp/gate-site2;
# gate's conf is linked; the offline environment is exported. SKIP_SETUP=1 (a CPU smoke test) skips it all.
if [ -z "${SKIP_SETUP:-}" ]; then
  [ -d /tmp/gate-site ] || { echo "$2's install is gone (a fresh machine): stop"; exit 3; }
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gate-site2 "$1"/whl/*.whl 2>&1 | tail -2
  [ -e gate/conf ] || ln -s ../conf gate/conf
  export PYTHONPATH="$PWD:/tmp/gate-site:/tmp/gate-site2" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline
fi
