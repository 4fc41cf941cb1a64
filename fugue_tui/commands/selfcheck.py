"""``fugue-tui selfcheck``: the parity contract (docs/fidelity.md) proven on this machine.

Starts the self-check's process (``python -m engine.selfcheck``: torch imported once, every
path of ``engine.selfcheck.cases`` trained under seq and unified_model and compared), shows
one line per path — ``bit for bit``, ``within bound (max |Δ| = …, bound …)`` or ``outside
bound — a defect, please report it`` — and the machine's facts, and stores the verdict per
machine beside the profiles (``<runs_dir>/selfcheck.csv``, ``engine.selfcheck.store``).

Exit status: 0 every path at or inside its documented bound, 1 otherwise (or the check
could not finish), 2 bad input (one line, nothing run or written).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.errors import ConfigError


def _device(text: str) -> tuple[str, dict[str, Any] | None]:
    """``cpu``, or ``cuda``/``cuda:N`` with the GPU's NVML identity.

    Raises:
        ConfigError: another value, or CUDA where NVML sees no GPU.
    """
    if text == "cpu":
        return "cpu", None
    if text != "cuda" and not (text.startswith("cuda:") and text[5:].isdigit()):
        raise ConfigError(f"argument --device: must be cpu, cuda or cuda:N, got {text!r}")
    from fugue_tui.commands.profile import _machine

    return _machine(text)


def selfcheck(device_text: str = "cpu", runs_dir: str = "runs", as_json: bool = False,
              out=None, python: str | None = None) -> int:
    """Run the self-check on ``device_text``, store its verdict under ``runs_dir`` and
    print it (a table, or with ``as_json`` a ``fugue-tui/selfcheck`` document); the exit
    status of the module docstring.

    Raises:
        ConfigError: a bad device or an unwritable runs folder (exit 2).
    """
    from engine.define.paths import user_path
    from engine.profile.store import identity
    from engine.results.preflight import preflight

    out = out or sys.stdout
    device, gpu = _device(device_text)
    folder = user_path(runs_dir, "argument --runs-dir")
    preflight(folder)  # an unwritable runs folder: one line, exit 2, nothing run
    with tempfile.TemporaryDirectory(prefix="fugue-selfcheck-") as tmp:
        answer = Path(tmp) / "selfcheck.json"
        # The check's own process: this one (the front end) never imports torch.
        status = subprocess.call([python or sys.executable, "-m", "engine.selfcheck",
                                  "--device", device, "--out", str(answer),
                                  # progress lines only where someone watches them
                                  *([] if sys.stderr.isatty() else ["--quiet"])],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        if status == 2:
            return 2  # bad input: the process said why, on stderr
        body = _read(answer, status)
    if body is None:
        return 1
    from datetime import datetime, timezone

    from engine.selfcheck.store import append, selfcheck_path

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S")
    told = append(folder, body, identity(device, gpu), stamp)
    for line in told:
        print(f"fugue-tui selfcheck: {line}", file=sys.stderr)
    if as_json:
        from fugue_tui.jsonout import document, dump

        dump(document("selfcheck", stored=str(selfcheck_path(folder)), **body), out)
    else:
        print_table(body, out)
        print(f"verdict stored in {selfcheck_path(folder)}", file=out)
    return int(body["exit_status"])


def _read(answer: Path, status: int) -> dict[str, Any] | None:
    import json

    try:
        body = json.loads(answer.read_text())
    except (OSError, ValueError) as exc:
        print(f"fugue-tui selfcheck: the check's process ended with status {status} and "
              f"no verdict ({type(exc).__name__}: {exc}); nothing stored", file=sys.stderr)
        return None
    return body if isinstance(body, dict) else None


def print_table(body: dict[str, Any], out=None) -> None:
    """The verdict as a table: one row per path, then the machine and the counts."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from engine.selfcheck.verdict import OUTSIDE, WITHIN, summary

    console = Console(file=out) if out is not None else Console()
    table = Table(title=f"fugue-tui selfcheck on {body['device']}: seq against unified_model",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, padding=(0, 1))
    for column in ("path", "promise (docs/fidelity.md)", "verdict"):
        table.add_column(column, overflow="fold")
    for p in body["paths"]:
        style = "red" if p["verdict"] == OUTSIDE else "yellow" if p["verdict"] == WITHIN \
            else "green"
        holds = "by construction" if p["holds"] == "construction" else p["bound_rule"]
        text = p["text"] + (f"; {p['note']}" if p.get("note") else "")
        table.add_row(p["name"], holds, f"[{style}]{text}[/{style}]")
    console.print(table)
    m = body["machine"]
    gpu = f", GPU {m['gpu_name']} (cc {m['gpu_capability']})" if m.get("gpu_name") else ""
    console.print(
        f"machine: {m.get('cpu_model') or '?'} ({m.get('cpu_vendor') or '?'}), ISA "
        f"{m.get('isa')}, BLAS {m.get('blas') or '?'}"
        f"{' ' + m['mkl_version'] if m.get('mkl_version') else ''}"
        f"{', dispatch ' + m['dispatch'] if m.get('dispatch') else ''}; torch "
        f"{m.get('torch_version')}, CUDA {m.get('cuda_version') or 'none'}{gpu}; NVML "
        f"{'yes' if m.get('nvml') else 'no'}, MPS control "
        f"{'yes' if m.get('mps_control') else 'no'}, Ray {m.get('ray_version') or 'no'}",
        highlight=False, markup=False, soft_wrap=True)
    counted = body["counts"]
    end = ("every path at or inside its documented bound" if body["exit_status"] == 0
           else "a path is outside its bound: a defect, please report it with this output")
    console.print(f"{summary(counted)} in {body['elapsed_s']:.1f} s: {end}", highlight=False,
                  markup=False, soft_wrap=True)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "selfcheck", help="prove the parity contract on this machine: seq against "
                          "unified_model, path by path",
        description="Trains a few steps of a plain MLP, a BatchNorm+Dropout MLP and a small "
                    "CNN under seq and under unified_model (kernels exact and batched; SGD, "
                    "SGD with a learning rate per member, Adam; fp32 and, on a reduced set, "
                    "the other precisions the device runs) and compares every value: bit "
                    "for bit where the contract says by construction, else within its "
                    "documented bound (docs/fidelity.md). Stores the verdict per machine in "
                    "RUNS_DIR/selfcheck.csv. Exit 0 when every path is at or inside its "
                    "bound, 1 otherwise, 2 for bad input.")
    parser.add_argument("--device", dest="selfcheck_device", default="cpu", metavar="DEVICE",
                        help="cpu (default), cuda or cuda:N")
    parser.add_argument("--runs-dir", dest="selfcheck_runs_dir", metavar="DIR",
                        help="where the verdict is stored, beside the profiles (default runs)")
    parser.add_argument("--json", action="store_true", dest="selfcheck_json",
                        help="the verdict as JSON (schema fugue-tui/selfcheck, docs/json.md); "
                             "the same exit status")


def run(args) -> int:
    runs_dir = args.selfcheck_runs_dir  # "" is refused (user_path), never read as unset
    if runs_dir is None:
        runs_dir = getattr(args, "runs_dir", None) or "runs"
    return selfcheck(args.selfcheck_device, runs_dir, as_json=args.selfcheck_json)
