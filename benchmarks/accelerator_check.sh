#!/usr/bin/env bash
# Issue 37's accelerator figures, in one run on a machine whose JAX sees a GPU
# (results: benchmarks/results/accelerator_check/). Runs the zoo from this source tree with
# the machine's own JAX and NumPyro (PYTHONPATH; the zoo's pins are not installed there)
# and writes logs and the SBC summaries under OUT (default ./accelerator-check):
#   1. SBC of PCVM's NUTS, 1,000 simulations, --device auto (the GPU: vectorized lanes);
#      sbc_gpu_1000_again: the same command into another folder, after it (JAX's
#      persistent compilation cache then holds the programs: a user's second run);
#   2. the same SBC, 100 simulations, --device cpu (one chain per CPU device);
#   3. the default `zoo compare` with --device auto (the CPU) and --device accelerator,
#      each with an empty cache, the latter stopped at COMPARE_LIMIT seconds.
# Usage: bash benchmarks/accelerator_check.sh   (optional: OUT=dir COMPARE_LIMIT=s STEPS='sbc_gpu_1000 ...')
set -u
OUT=${OUT:-accelerator-check}
COMPARE_LIMIT=${COMPARE_LIMIT:-150}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export ZOO_CACHE_DIR=$(mktemp -d)   # no reference or compiled program from an earlier run
PY=${PY:-python3}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  $PY -c "import jax, numpyro; print('jax', jax.__version__, 'numpyro', numpyro.__version__, jax.devices())"
  nproc
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

timed() {  # timed NAME LIMIT CMD...: wall seconds and exit status into OUT/NAME.time
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  echo "$name rc=$rc wall_s=$(awk "BEGIN{print $t1 - $t0}")" | tee "$OUT/$name.time"
}

STEPS=${STEPS:-sbc_gpu_1000 sbc_cpu_100 compare_auto compare_accelerator}
for step in $STEPS; do case $step in
  sbc_gpu_1000) timed $step 400 $PY -m zoo.cli sbc --model pcvm --engine nuts --sims 1000 --out "$OUT/sbc-gpu" \
                  --no-progress ;;
  sbc_gpu_1000_again) timed $step 400 $PY -m zoo.cli sbc --model pcvm --engine nuts --sims 1000 \
                        --out "$OUT/sbc-gpu-again" --no-progress ;;
  sbc_cpu_100) timed $step 200 $PY -m zoo.cli sbc --model pcvm --engine nuts --sims 100 --device cpu \
                 --out "$OUT/sbc-cpu" --no-progress ;;
  compare_auto) timed $step 200 $PY -m zoo.cli compare --no-progress --no-cache --out "$OUT/compare-auto" ;;
  compare_accelerator) timed $step "$COMPARE_LIMIT" $PY -m zoo.cli compare --no-progress --no-cache \
                         --device accelerator --out "$OUT/compare-accelerator" ;;
esac; done
for f in sbc-gpu sbc-gpu-again sbc-cpu; do cp "$OUT/$f/pcvm/sbc.md" "$OUT/$f.md" 2>/dev/null; done
for f in compare-auto compare-accelerator; do
  grep -h "Computed on\|^| reference\|certified" "$OUT/$f/report.md" 2>/dev/null | head -5 > "$OUT/$f.txt"
done
tail -n 3 "$OUT"/*.log
cat "$OUT"/*.time
