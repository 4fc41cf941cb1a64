"""The kernel-dispatch matrix: the parity-sensitive tests (``pytest -m parity``) run again
under other kernel-dispatch settings, so that a test passing on one CPU only fails here.

The contract (engine.executors.unified.contract, docs/fidelity.md) says which paths are bit
for bit by construction and which agree within a rounding bound. A host picks its kernels:
MKL takes other code paths on an Intel AVX-512, an AMD EPYC or an AVX2 host, and ATen's
vectorised kernels follow the ISA. The matrix imitates other hosts on this one:

* ``MKL_CBWR=COMPATIBLE`` — MKL's conditional numerical reproducibility branch, one code
  path on any x86 CPU;
* one setting chosen by this host's vendor and ISA (:func:`host_setting`): on an Intel
  AVX-512 host ``MKL_CBWR=AVX2`` (close to what MKL runs on AMD); elsewhere an AVX2 host
  (``MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2``: MKL already runs its AVX2 branch on AMD,
  so ATen's vector width is what moves); on an AVX2 host an AVX one.

Each run records what the tests compared (tests/parity.py). Per setting it prints how many
probed results differ from the default run and the largest difference seen against its
bound. Exit 1 when a run fails, or when ``COMPATIBLE`` changes no probed result (the
matrix would test nothing); 0 otherwise. Without MKL (torch not built with it, e.g. on
aarch64) the MKL settings mean nothing: it says so and exits 0.

Usage: ``.venv/bin/python scripts/parity_matrix.py [--keep DIR] [--verbose] [PYTEST_ARGS]``
(pytest's own arguments pass through: paths, ``-k EXPR``; after ``--`` anything goes).
Exit 0: every setting passed; 1: a parity test failed, no parity test was selected, or
``COMPATIBLE`` changed nothing; 2: pytest could not run (a path that does not exist, a bad
option) or a bad argument here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from any folder: the engine beside it

from engine.measure.provenance import cpu_model, cpu_vendor  # noqa: E402

#: Variables that steer kernel dispatch: cleared for the default run, so that a caller's
#: own setting cannot make "default" something else.
#: Probe kinds whose bound the contract derives (tests/parity.py, ``Parity.within``): the
#: contract wants 10x headroom over what any setting shows.
CONTRACT_KINDS = ("rounding", "pass", "adam")

DISPATCH_VARS = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                 "MKL_DEBUG_CPU_TYPE")


def host_setting(vendor: str, isa: str) -> tuple[dict[str, str], str]:
    """The second setting of the matrix for a host of ``vendor`` whose ATen capability is
    ``isa`` (``torch.backends.cpu.get_cpu_capability()``): (variables, what it imitates)."""
    if isa == "AVX512" and vendor == "GenuineIntel":
        return {"MKL_CBWR": "AVX2"}, "MKL's AVX2 branch, close to what MKL runs on AMD"
    if isa == "AVX512":
        return ({"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
                "an AVX2 host (MKL's AVX2 branch, ATen's 256-bit kernels)")
    if isa == "AVX2":
        return ({"MKL_CBWR": "AVX", "ATEN_CPU_CAPABILITY": "default"},
                "an AVX host (MKL's AVX branch, ATen's scalar kernels)")
    return {"ATEN_CPU_CAPABILITY": "default"}, "ATen's scalar kernels"


def _torch_facts(python: str) -> dict:
    code = ("import json, torch; print(json.dumps({'torch': torch.__version__, "
            "'isa': torch.backends.cpu.get_cpu_capability(), "
            "'mkl': torch.backends.mkl.is_available()}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                         env=_env({}))
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env(setting: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DISPATCH_VARS}
    env.update(setting)
    return env


def run_setting(python: str, setting: dict[str, str], record: Path,
                extra: list[str]) -> tuple[int, str, float]:
    """Run the marked tests under ``setting``; (exit code, pytest's last line, seconds)."""
    env = _env(setting)
    env["FUGUE_PARITY_RECORD"] = str(record)
    cmd = [python, "-m", "pytest", "-q", "-m", "parity", "-p", "no:cacheprovider",
           "-o", "addopts=", "--timeout=600", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode not in (0,):
        sys.stdout.write(proc.stdout[-6000:])
        sys.stderr.write(proc.stderr[-2000:])
    return proc.returncode, (lines[-1] if lines else "(no output)"), time.monotonic() - t0


def compare(default: dict, other: dict) -> tuple[int, int, list[str]]:
    """(probes differing from the default run, probes in both, keys differing)."""
    keys = sorted(set(default) & set(other))
    differing = [k for k in keys if default[k]["digest"] != other[k]["digest"]]
    return len(differing), len(keys), differing


def worst_margin(records: dict) -> tuple[float, str]:
    """The largest difference/bound ratio among the probes bounded by the contract's
    derived bounds (:data:`CONTRACT_KINDS`; not the half precisions' table bounds, not a
    test's own tolerance), and its key."""
    worst, key = 0.0, ""
    for k, r in records.items():
        bound = r.get("bound")
        if bound and r.get("kind") in CONTRACT_KINDS:
            ratio = r["diff"] / bound
            if ratio > worst:
                worst, key = ratio, k
    return worst, key


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="write each setting's records into DIR")
    ap.add_argument("--verbose", action="store_true", help="list the probes that differ")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (paths, -k EXPR)")
    args, unknown = ap.parse_known_args(argv)
    args.pytest_args = [*unknown, *args.pytest_args]
    python = sys.executable
    facts = _torch_facts(python)
    vendor, isa = cpu_vendor(), facts["isa"]
    print(f"parity matrix: {cpu_model() or 'unknown CPU'} ({vendor or 'unknown vendor'}), "
          f"ATen ISA {isa}, torch {facts['torch']}, MKL {'yes' if facts['mkl'] else 'no'}")
    if not facts["mkl"]:
        print("parity matrix: torch has no MKL here: the MKL settings would change nothing; "
              "skipped")
        return 0
    second, imitates = host_setting(vendor, isa)
    settings = [("default", {}, "this host as it is"),
                ("COMPATIBLE", {"MKL_CBWR": "COMPATIBLE"}, "MKL's one path for any x86 CPU"),
                ("host", second, imitates)]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="parity-matrix-"))
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    codes: dict[str, int] = {}
    print(f"{'setting':<42} {'tests':<28} {'probes differing':<22} {'contract diff/bound':<15}")
    for label, setting, why in settings:
        record = folder / f"{label}.json"
        code, last, secs = run_setting(python, setting, record, args.pytest_args)
        codes[label] = code
        records = json.loads(record.read_text()) if record.exists() else {}
        results[label] = records
        name = " ".join(f"{k}={v}" for k, v in setting.items()) or "default"
        if label == "default":
            differ = "—"
        else:
            n, total, keys = compare(results["default"], records)
            differ = f"{n} of {total}"
            results[label + ":differing"] = {"keys": keys}
        worst, key = worst_margin(records)
        tests = ", ".join(w.strip() for w in last.split(" in ")[0].split(",")
                          if "deselected" not in w) or "none selected"
        print(f"{name:<42} {tests[:27]:<28} {differ:<22} {worst:<15.3g}  ({secs:.0f} s; {why})")
        if worst > 0.1:
            print(f"  note: {key} is at {worst:.2f} of its bound (the contract wants 10x "
                  "headroom)")
        if args.verbose and label != "default":
            for k in results[label + ":differing"]["keys"]:
                print(f"  differs: {k}")
    n_compat = len(results.get("COMPATIBLE:differing", {}).get("keys", []))
    # pytest's exit codes: 1 tests failed, 2 interrupted or usage error, 4 usage error
    # (a path that does not exist), 5 no test collected
    if any(c in (2, 3, 4) for c in codes.values()):
        print("parity matrix: pytest could not run (exit "
              f"{sorted(set(codes.values()))}: a bad path or option, printed above)")
        return 2
    if any(c == 5 for c in codes.values()):
        print("parity matrix: FAILED: no parity test selected (the paths or -k given hold "
              "none marked parity)")
        return 1
    if any(codes.values()):
        print("parity matrix: FAILED: a parity test fails under a setting above (its output "
              "is printed before the table)")
        return 1
    if n_compat == 0:
        print("parity matrix: FAILED: MKL_CBWR=COMPATIBLE changed no probed result: the "
              "matrix tests nothing on this host")
        return 1
    print("parity matrix: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
