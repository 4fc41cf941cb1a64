"""Part ``strategies``: the four strategies side by side on the offline family, and the
unified model's ablation ladder.

``python -m bench.strategies [--passes N] [--epochs E] [--executors ...] [--no-ablation]``
runs ONE real campaign through the runner (``python -m engine.runner``, exactly what
``fugue-tui --batch`` runs), in a temporary runs folder:

* the offline family (D_ens, D_cv, D_hpo, D_mm, D_reg) × the executors (default: every
  registered one) × ``--passes`` passes (default 5; passes outermost, so every pass runs
  every strategy minutes apart), one torch thread per process;
* unless ``--no-ablation``: D_ens under ``unified_model`` with ``sweep = "ablation"`` (the
  six rungs of fugue-compat.md), same passes.

Figures (one repetition = one pass):

* ``T_group:<exp>``: the makespan of each strategy; ratio to seq = 1 / speedup
  (fugue-compat.md: speedup = mean seq T_group ÷ mean strategy T_group; here the medians
  and per-pass ratios);
* ``throughput:ablation``: ``throughput_group`` of each rung of the ladder, baseline rung A;
* ``load_1min`` is not sampled per repetition here: every group row carries
  ``host_load_start``/``host_load_end`` (see the raw runs folder if ``--keep``).

``--epochs`` shortens every experiment (a user experiments file merged over the catalogue,
as users do); the command line in the table records it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PART = "strategies"
OFFLINE = ("D_ens", "D_cv", "D_hpo", "D_mm", "D_reg")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m bench.{PART}", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=5, help="passes (default 5)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs of every offline experiment (default: the catalogue's)")
    parser.add_argument("--executors", nargs="+", default=None)
    parser.add_argument("--no-ablation", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="keep the runs folder here")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be >= 1")
    if args.passes < 5:
        print(f"warning: {args.passes} passes (the protocol asks for >= 5)", file=sys.stderr)
    from bench import results as bench_results
    from engine.processes import engine_env
    from engine.registry import EXECUTORS
    from engine.results.columns import GROUPS_FILE
    from engine.results.read import read_rows

    executors = args.executors or [e for e in ("seq", "mp", "ray", "unified_model")
                                   if e in EXECUTORS]
    command = (f"python -m bench.{PART} --passes {args.passes}"
               + (f" --epochs {args.epochs}" if args.epochs else "")
               + f" --executors {' '.join(executors)}" + (" --no-ablation" if args.no_ablation else ""))
    tmp = Path(tempfile.mkdtemp(prefix="bench-strategies-"))
    try:
        exps = ""
        if args.epochs:
            import tomli_w

            from engine.define.catalogue import load_catalogue

            table = {e: {"epochs": args.epochs} for e in OFFLINE}
            # D_mm's members carry their own epochs: shorten them too.
            members = load_catalogue().get("D_mm").to_dict().get("members") or []
            if members:
                table["D_mm"] = {"members": [
                    {k: (args.epochs if k == "epochs" else v) for k, v in m.items()
                     if v is not None} for m in members]}
            exps = tomli_w.dumps({"experiments": table})
        (tmp / "exps.toml").write_text(exps)
        campaigns = [("strategies", f'experiments = {list(OFFLINE)!r}\nexecutors = {executors!r}\n')]
        if not args.no_ablation and "unified_model" in EXECUTORS:
            campaigns.append(("ablation", 'experiments = "D_ens"\nexecutors = ["unified_model"]\n'
                                          '[options.unified_model]\nsweep = "ablation"\n'))
        for name, body in campaigns:
            head = (f'name = "{name}"\npasses = {args.passes}\nthreads = 1\ndevice = "auto"\n'
                    f'runs_dir = "{tmp / "runs"}"\nexperiments_file = "exps.toml"\n')
            top, _, tables = body.partition("[")
            (tmp / f"{name}.toml").write_text(head + top + ("[" + tables if tables else ""))
            proc = subprocess.run([sys.executable, "-m", "engine.runner", str(tmp / f"{name}.toml")],
                                  env=engine_env(), stdin=subprocess.DEVNULL)
            if proc.returncode not in (0, 1):
                print(f"campaign {name} ended with status {proc.returncode}", file=sys.stderr)
                return proc.returncode
        rows = [r for r in read_rows(tmp / "runs" / GROUPS_FILE) if r["status"] == "ok"]
        if args.keep:
            shutil.copytree(tmp / "runs", args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    Figure = bench_results.Figure
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    out = []
    for exp in OFFLINE:
        values = {e: _by_pass(rows, exp, e, "strategies", "T_group") for e in executors}
        values = {e: v for e, v in values.items() if v}
        if "seq" in values:
            out += bench_results.figure_rows(
                PART, Figure(f"T_group:{exp}", "s", baseline="seq",
                             note="makespan per strategy, one value per pass; ratio = 1/speedup"),
                _aligned(values), run_id, prov)
    ladder = {}
    for r in rows:
        if r["campaign_id"] == "ablation" and r.get("rung"):
            ladder.setdefault(r["rung"], {})[int(r["pass"])] = float(r["throughput_group"])
    if "A" in ladder:
        out += bench_results.figure_rows(
            PART, Figure("throughput:ablation", "samples/s", baseline="A",
                         note="D_ens throughput_group of each rung (fugue-compat.md ladder); "
                              "on CPU there are no streams, so rungs C and B run the same code"),
            _aligned({k: v for k, v in ladder.items()}), run_id, prov)
    if args.no_write or not out:
        for r in out:
            print(r["figure"], r["variant"], r["repetition"], r["value"])
        return 0 if out else 1
    bench_results.publish(PART, out, args.results_dir)
    return 0


def _by_pass(rows, exp: str, executor: str, campaign: str, column: str) -> dict[int, float]:
    return {int(r["pass"]): float(r[column]) for r in rows
            if r["campaign_id"] == campaign and r["exp_id"] == exp and r["executor"] == executor
            and r[column] != ""}


def _aligned(values: dict[str, dict[int, float]]) -> dict[str, list[float]]:
    """Only the passes every variant has, in pass order (per-pass ratios stay paired)."""
    common = sorted(set.intersection(*(set(v) for v in values.values())))
    return {k: [v[p] for p in common] for k, v in values.items()}


if __name__ == "__main__":
    sys.exit(main())
