#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py), from the checkout, no install: on a lent GPU machine
#   bash bench/gpu_check.sh                 # default parts, budgets <= 4 minutes in all
#   bash bench/gpu_check.sh energy mps      # only these parts; --rerun SUMMARY: what failed
#   bash bench/gpu_check.sh --dry-run       # no GPU touched: every part SKIPs with its reason
#   bash bench/gpu_check.sh --list          # parts, budgets, needs
# Writes <out>/gpu_check.tar.gz and <out>/gpu_check_summary.txt; <out> is --out, else $OUT,
# else ./gpu_check_out. Python: $PYTHON, else python3. Exit 0: no part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m bench.gpu_check "$@"
