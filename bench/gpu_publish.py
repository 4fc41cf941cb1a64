"""The GPU check's archives as benchmark rows: ``bench/results/gpu.csv`` and the ``gpu``
section of ``bench/RESULTS.md``, rendered like every other part (``bench.results``).

    python -m bench.gpu_publish bench/results/gpu_check/20261204-*.tar.gz

The archives (``bash bench/gpu_check.sh``'s ``gpu_check.tar.gz``, kept under
``bench/results/gpu_check/`` as the evidence) are read in the order given; for each part the
last archive in which it PASSed gives its figures, so a part rerun after a fix replaces its
failed run. All rows of one call share one ``run_id`` (the section shows the latest), and
carry the GPU machine's provenance from the archive (its host, Python and torch — not this
machine's), with the GPU and its driver in place of the CPU model, which the check does not
record. What each part measured, and how many repetitions (one: a lent machine's fifteen
minutes), is in each figure's note. Torch-free.

Raises (exit 2, one line): an archive that cannot be read or holds no ``summary.json``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.results import RESULTS_DIR, Figure, figure_rows, new_run_id, publish
from engine.measure.provenance import dist_version

PART = "gpu"


class Archive:
    """One ``gpu_check.tar.gz``: its summary, environment text and files by name."""

    def __init__(self, path: Path):
        self.path = path
        try:
            with tarfile.open(path, "r:gz") as tar:
                self.files = {m.name.split("/", 1)[-1]: tar.extractfile(m).read()
                              for m in tar.getmembers() if m.isfile()}
        except (OSError, tarfile.TarError) as exc:
            raise ValueError(f"{path}: not a GPU check archive ({exc})") from None
        if "summary.json" not in self.files:
            raise ValueError(f"{path}: no summary.json in it (not a GPU check archive?)")
        self.summary = json.loads(self.files["summary.json"])
        self.environment = self.files.get("environment.txt", b"").decode("utf-8", "replace")

    def passed(self, part: str) -> dict[str, Any] | None:
        found = self.summary["parts"].get(part) or {}
        return found.get("numbers") if found.get("verdict") == "PASS" else None

    def provenance(self, command: str) -> dict[str, Any]:
        facts = self.summary["facts"]
        gpus = ", ".join(sorted({g["name"] for g in facts.get("gpus") or []})) or "no GPU"
        driver = re.search(r"Driver Version:\s*(\S+)", self.environment)
        cpus = re.search(r", (\d+) CPUs", self.environment)
        return {"timestamp": facts["utc"].replace("-", "").replace(":", "").replace("T", "_")
                .rstrip("Z"), "host": facts["host"],
                "cpu_model": f"{gpus} GPU, driver {driver.group(1) if driver else '?'}",
                "cpu_cores": cpus.group(1) if cpus else "", "python_version": facts["python"],
                "torch_version": facts["torch"],
                # the check runs from this checkout (no install there): this version
                "fugue_tui_version": dist_version("fugue-tui") or "",
                "fugue_tui_commit": facts["commit"], "command": command}


def _f(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _rows_by(numbers: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {r["executor"]: r for r in numbers.get("rows") or [] if r.get("status") == "ok"}


def figures(part: str, numbers: dict[str, Any]) -> list[tuple[Figure, dict[str, list[float]]]]:
    """The figures one PASSed part gives (empty for parts without numbers to publish)."""
    out: list[tuple[Figure, dict[str, list[float]]]] = []
    if part == "energy":
        out.append((Figure("energy over 15 s of matmul load", "J", "power_integral", "",
                           "NVML total-energy counter vs the integral of power sampled "
                           "every 0.1 s, same window; one run"),
                    {"power_integral": [numbers["integral_j"]],
                     "nvml_counter": [numbers["counter_j"]]}))
    if part in ("seq_vs_unified", "seq_vs_unified_k32"):
        k = 8 if part == "seq_vs_unified" else 32
        rows = _rows_by(numbers)
        if {"seq", "unified_model"} <= set(rows):
            note = (f"resnet18 ensemble K = {k} on synthetic_cifar10, one epoch, batch 128, "
                    "fp32; T_group of one cell each, back to back; ratio < 1: unified faster "
                    "(the issue's comparison: unified >= 2x seq at K = 32, ratio <= 0.5)")
            out.append((Figure(f"T_group resnet18 K={k}", "s", "seq",
                               "<=0.5" if k == 32 else "", note),
                        {e: [_f(rows[e]["T_group"])] for e in ("seq", "unified_model")}))
            out.append((Figure(f"energy per trained model resnet18 K={k}", "J/model", "seq", "",
                               "energy_group ÷ K (NVML energy counter over the group window)"),
                        {e: [_f(rows[e]["energy_group"]) / k] for e in ("seq", "unified_model")
                         if _f(rows[e]["energy_group"]) is not None}))
    if part == "precision":
        for name in ("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16"):
            got = numbers.get(name)
            if isinstance(got, dict) and got.get("T_group_seq") and got.get("T_group_unified"):
                out.append((Figure(f"T_group resnet18 K=4 {name}", "s", "seq", "",
                                   "the precision part: resnet18 K = 4, synthetic_cifar10, "
                                   "one epoch; one cell per executor and precision"),
                            {"seq": [got["T_group_seq"]], "unified_model": [got["T_group_unified"]]}))
    if part == "ablation":
        rows = [r for r in numbers.get("rows") or [] if r.get("status") == "ok"]
        values = {r["rung"]: [_f(r["throughput_group"])] for r in rows
                  if _f(r.get("throughput_group"))}
        if "A" in values:
            out.append((Figure("ablation throughput resnet18 K=8", "samples/s", "A", "",
                               "the unified ladder's rungs, one cell each; D and D+FL asked "
                               "for compile (reduce-overhead): its probe refused on this "
                               "GPU and they trained eagerly, the failed compile inside "
                               "the window"), values))
    if part == "profile_device":
        out.append((Figure("reserved device memory K=8 resnet18", "MiB", "measured", "",
                           "fugue-tui profile's stacked line (probe at K = 1, 2, 4) vs a "
                           "real unified_model cell's torch_peak_reserved_mb; target 10 %"),
                    {"measured": [numbers["measured_reserved_mb_k8"]],
                     "predicted": [numbers["predicted_reserved_mb_k8"]]}))
    if part in ("mps", "packing"):
        rows = _rows_by(numbers)
        if "mp" in rows:
            what = ("mp through a private MPS daemon" if part == "mps"
                    else "mp packed two jobs per device")
            out.append((Figure(f"T_group {part} K=4", "s", "", "",
                               f"{what}, resnet18 K = 4, one epoch; one cell"),
                        {"mp": [_f(rows["mp"]["T_group"])]}))
    return out


def collect(archives: Sequence[Archive]) -> list[dict[str, Any]]:
    """Rows for ``bench/results/gpu.csv``: per part, from the last archive it PASSed in."""
    run_id = new_run_id()
    latest: dict[str, Archive] = {}
    for archive in archives:
        for part in archive.summary["parts"]:
            if archive.passed(part) is not None:
                latest[part] = archive
    rows: list[dict[str, Any]] = []
    for part, archive in latest.items():
        argv = re.search(r"^argv: (.*)$", archive.environment, re.M)
        prov = archive.provenance(f"bash bench/gpu_check.sh {argv.group(1) if argv else ''}"
                                  .strip() + f"  [{archive.path.name}]")
        for figure, values in figures(part, archive.passed(part) or {}):
            rows += figure_rows(PART, figure, values, run_id, prov)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_publish", description=__doc__
                                     .split("\n\n")[0])
    parser.add_argument("archives", nargs="+", type=Path)
    parser.add_argument("--results-dir", type=Path, default=None,
                        help=f"where gpu.csv goes (default {RESULTS_DIR})")
    parser.add_argument("--dry-run", action="store_true", help="print the rows, write nothing")
    args = parser.parse_args(argv)
    try:
        rows = collect([Archive(p) for p in args.archives])
    except ValueError as exc:
        print(f"gpu_publish: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print("gpu_publish: no part PASSed in these archives: nothing to publish",
              file=sys.stderr)
        return 1
    if args.dry_run:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        print(out.getvalue(), end="")
        return 0
    publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
