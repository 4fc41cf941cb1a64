#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): run from the checkout on a GPU machine, no install:
#   bash bench/gpu_check.sh            # results under $OUT (the device tool's folder) or ./gpu_check_out
# At most ~6 minutes; parts: nvml_probe energy seq_vs_unified ablation mps pytest_gpu.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT_DIR="${OUT:-gpu_check_out}/gpu_check"
mkdir -p "$OUT_DIR"
{
  echo "# $(date -u +%Y%m%dT%H%M%SZ) $(hostname) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi -L 2>&1 || true
  python - <<'PY'
import importlib.util, sys
print("python", sys.version.split()[0])
for m in ("torch", "torchvision", "pynvml", "psutil", "filelock", "tomli_w", "pytest", "sklearn"):
    spec = importlib.util.find_spec(m)
    ver = ""
    if spec:
        try:
            ver = getattr(__import__(m), "__version__", "")
        except Exception as exc:
            ver = f"import error: {exc}"
    print(f"{m}: {'missing' if spec is None else ver or 'present'}")
PY
} | tee "$OUT_DIR/environment.txt"
timeout 390 python -m bench.gpu_check --out "$OUT_DIR" "$@" 2>&1 | tee "$OUT_DIR/gpu_check.log"
exit "${PIPESTATUS[0]}"
