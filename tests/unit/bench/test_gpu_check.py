"""The GPU check (bench/gpu_check.py) without a GPU: its budgets, its parts' endings (pass,
failure, crash, over budget, missing needs), the rerun of what failed, the one archive and
summary, and the minimal environment of a lent GPU machine (bench/gpu_env.py), in which
every module of the engine and every GPU test file must import (Ray's excepted).

CI (.ci/run) also runs the whole dry run in that environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from bench import gpu_check
from bench.gpu_check import DEFAULT_BUDGET_S, PARTS, SUMMARY, failed_in

ROOT = Path(__file__).resolve().parents[3]


def test_default_parts_fit_the_budget_and_every_part_says_what_it_shows():
    assert DEFAULT_BUDGET_S <= 240
    assert sum(p.budget_s for p in PARTS.values() if p.default) <= DEFAULT_BUDGET_S
    for p in PARTS.values():
        assert p.budget_s > 0 and p.about, p.name
    assert all(p.needs for p in PARTS.values())  # every part says what it imports


def test_every_gpu_test_file_is_a_part_of_the_check():
    files = sorted(f"tests/gpu/{p.name}" for p in (ROOT / "tests" / "gpu").glob("test_*.py"))
    assert files
    for path in files:
        assert Path(path).stem in PARTS, f"{path}: register it with gpu_tests() in bench/gpu_check.py"


def test_every_part_ends_with_its_verdict():
    """A part's function ends in ``return detail, numbers`` (or a raise): the first GPU run
    lost devices_pinning's PASS to a missing return ("cannot unpack non-iterable NoneType")
    after its rows had all passed. Checked on the source, since the non-dry paths need a
    GPU."""
    import ast
    import inspect
    import textwrap

    for name, spec in PARTS.items():
        fn = inspect.unwrap(spec.fn)
        try:
            source = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            continue  # a generated part (gpu_tests): its runner returns by construction
        body = ast.parse(source).body[0].body
        assert isinstance(body[-1], (ast.Return, ast.Raise)), f"{name} ends without a verdict"


def test_ray_parts_are_not_default():
    """Ray cannot travel to a lent GPU machine: a default part needing it would always SKIP."""
    assert not [p.name for p in PARTS.values() if "ray" in p.needs and p.default]


def _check(tmp_path, *args, extra_env=None, timeout=120):
    env = {**os.environ, "GPU_CHECK_EXTRA_PARTS": "tests.unit.bench.gpu_check_fake_parts",
           "PYTHON": sys.executable, **(extra_env or {})}
    env.pop("OUT", None)
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--out",
                           str(tmp_path / "out"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    summary = (tmp_path / "out" / SUMMARY).read_text() if (tmp_path / "out" / SUMMARY).exists() else ""
    return proc, summary


def _archive(tmp_path) -> dict:
    with tarfile.open(tmp_path / "out" / "gpu_check.tar.gz") as tar:
        names = tar.getnames()
        doc = json.load(tar.extractfile("gpu_check/summary.json"))
    return {"names": names, "summary": doc}


def _verdicts(summary: str) -> dict[str, str]:
    return {line.split()[1]: line.split()[0] for line in summary.splitlines()
            if line.split()[:1] and line.split()[0] in ("PASS", "FAIL", "SKIP")}


def test_each_way_a_part_ends_then_rerun_only_what_failed(tmp_path):
    t0 = time.monotonic()
    proc, summary = _check(tmp_path, "fake_pass", "fake_fail", "fake_crash", "fake_slow",
                           "fake_needs")
    took = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    verdicts = _verdicts(summary)
    assert {k: verdicts[k] for k in ("fake_pass", "fake_fail", "fake_crash", "fake_slow",
                                     "fake_needs")} == {
        "fake_pass": "PASS", "fake_fail": "FAIL", "fake_crash": "FAIL", "fake_slow": "FAIL",
        "fake_needs": "SKIP"}
    assert set(verdicts) == set(PARTS) | {"fake_pass", "fake_fail", "fake_crash", "fake_slow",
                                           "fake_needs"}  # every part listed
    assert "answer 42" in summary and "wrong answer 41" in summary
    assert "over budget: stopped at 3 s" in summary
    assert "exited 3 without a result" in summary
    assert "needs no_such_module_here, not installed here" in summary
    assert "not selected (run it: bash bench/gpu_check.sh energy)" in summary
    assert took < 3 + gpu_check.STOP_GRACE_S + 40  # the slow part was stopped, not awaited
    # the over-budget part's whole process group went with it
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.tar.gz", SUMMARY]
    got = _archive(tmp_path)
    assert {"gpu_check/summary.json", "gpu_check/summary.txt", "gpu_check/environment.txt",
            "gpu_check/fake_pass/result.json", "gpu_check/fake_crash/log.txt"} <= set(got["names"])
    parts = got["summary"]["parts"]
    assert parts["fake_pass"]["numbers"] == {"answer": 42}
    assert parts["fake_fail"]["numbers"] == {"answer": 41}
    assert "rerun the failed parts: bash bench/gpu_check.sh fake_fail fake_crash fake_slow" in summary
    assert failed_in(out / SUMMARY) == ["fake_fail", "fake_crash", "fake_slow"]

    first = tmp_path / "first.txt"
    first.write_text(summary)
    proc, summary = _check(tmp_path, "--rerun", str(first), "--time-factor", "2")
    assert proc.returncode == 1, proc.stderr
    doc = _archive(tmp_path)["summary"]
    assert doc["selected"] == ["fake_fail", "fake_crash", "fake_slow"]
    assert doc["parts"]["fake_slow"]["budget_s"] == 6
    assert "over budget: stopped at 6 s" in summary


def test_over_budget_part_leaves_no_process(tmp_path):
    proc, summary = _check(tmp_path, "fake_slow", "--keep")
    work = Path(proc.stdout.split("work folder kept: ")[1].split()[0])
    pid = int((work / "fake_slow" / "grandchild.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert not alive
    subprocess.run(["rm", "-rf", str(work.parent)])


def test_dry_run_may_not_pass(tmp_path):
    proc, summary = _check(tmp_path, "fake_pass", "fake_needs", "--dry-run", "--strict")
    assert proc.returncode == 1
    verdicts = _verdicts(summary)
    assert verdicts["fake_pass"] == "FAIL" and "must call run.gpu()" in summary
    assert verdicts["fake_needs"] == "SKIP"  # not a module a lent GPU machine has


def test_bare_python_skips_everything_and_strict_fails_it(tmp_path):
    """Where torch, NVML ... are missing, parts SKIP naming them; with --strict (CI's minimal
    environment must hold them) they FAIL."""
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(tmp_path / "bare")], check=True)
    bare = {"PYTHON": str(tmp_path / "bare" / "bin" / "python")}
    proc, summary = _check(tmp_path, "--dry-run", extra_env=bare)
    assert proc.returncode == 0, proc.stderr
    assert all(v == "SKIP" for v in _verdicts(summary).values())
    assert "SKIP  energy" in summary and "needs pynvml, torch, not installed here" in summary
    proc, summary = _check(tmp_path, "--dry-run", "--strict", extra_env=bare)
    assert proc.returncode == 1
    assert {n for n, v in _verdicts(summary).items() if v == "FAIL"} == {
        n for n, p in PARTS.items() if p.default}
    assert (tmp_path / "out" / "gpu_check.tar.gz").stat().st_size > 0


def test_the_check_gives_its_parts_data_and_config_folders_of_its_own(tmp_path, monkeypatch):
    """A lent GPU machine has no platformdirs (the engine's default folders): the check sets
    FUGUE_DATA_DIR and FUGUE_CONFIG_DIR under its work folder for every part (a user's own
    setting wins), and records them."""
    monkeypatch.delenv("FUGUE_DATA_DIR", raising=False)
    monkeypatch.setenv("FUGUE_CONFIG_DIR", str(tmp_path / "mine"))
    assert gpu_check.main(["--dry-run", "nvml_probe", "--out", str(tmp_path / "out"),
                           "--keep"]) == 0
    data = Path(os.environ["FUGUE_DATA_DIR"])
    assert data.name == "data" and data.parent.name.startswith("gpu-check-")
    assert os.environ["FUGUE_CONFIG_DIR"] == str(tmp_path / "mine")
    env_text = (data.parent / "gpu_check" / "environment.txt").read_text()
    assert f"FUGUE_DATA_DIR={data}" in env_text
    import shutil
    shutil.rmtree(data.parent)


def test_an_mps_zombie_is_not_a_daemon_left_behind(tmp_path):
    """The daemon double-forks, so on a machine whose init does not reap (the lent VM) its
    exit leaves a zombie: not counted; a running one is. Real processes named as MPS's."""
    import psutil

    for name, src in (("nvidia-cuda-mps-control", "true"), ("nvidia-cuda-mps-server", "sleep")):
        (tmp_path / name).symlink_to(shutil_which(src))
    zombie = subprocess.Popen([str(tmp_path / "nvidia-cuda-mps-control")])
    deadline = time.monotonic() + 10
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # the host's whole process table is scanned: another test beside this one (the mp
    # executor's fake daemons under scripts/test's parallel phase) may have its own there
    assert zombie.pid not in gpu_check.mps_processes_left(psutil, wait_s=0.2)
    server = subprocess.Popen([str(tmp_path / "nvidia-cuda-mps-server"), "30"])
    try:
        assert server.pid in gpu_check.mps_processes_left(psutil, wait_s=0.2)
    finally:
        server.kill()
        server.wait()
        zombie.wait()


def shutil_which(name: str) -> str:
    import shutil

    found = shutil.which(name)
    assert found, name
    return found


def test_usage_errors(tmp_path):
    proc, _ = _check(tmp_path, "no_such_part")
    assert proc.returncode == 2 and "unknown part(s) no_such_part" in proc.stderr
    (tmp_path / "s.txt").write_text("PASS  energy  1/35 s  fine\n")
    proc, _ = _check(tmp_path, "--rerun", str(tmp_path / "s.txt"))
    assert proc.returncode == 0 and "nothing to rerun" in proc.stdout


def test_archive_cuts_big_files(tmp_path):
    work = tmp_path / "gpu_check"
    work.mkdir()
    (work / "big.log").write_bytes(b"a" * (3 * 2**20) + b"THE END\n")
    (work / "small.txt").write_text("hello\n")
    gpu_check._archive(work, tmp_path / "a.tar.gz")
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        big = tar.extractfile("gpu_check/big.log").read()
        assert tar.extractfile("gpu_check/small.txt").read() == b"hello\n"
    assert len(big) < gpu_check.FILE_CAP + 200 and big.endswith(b"THE END\n")
    assert b"bytes cut by the GPU check" in big


def test_experiments_file_is_valid_toml():
    import tomllib

    doc = tomllib.loads(gpu_check.experiments_toml(gpu_check.EXPERIMENTS))
    assert doc["experiments"]["G_k8"]["optimizer_kwargs"] == {"momentum": 0.9}
    assert gpu_check.miniature(gpu_check.EXPERIMENTS["G_k32"])["k"] == 2


@pytest.mark.slow
def test_seq_vs_unified_real_path_on_cpu(tmp_path, monkeypatch):
    """The part's non-dry path (campaign run, rows, speedup) with the GPU replaced by the CPU
    and the experiments by their miniatures."""
    monkeypatch.setattr(gpu_check, "_resolve_gpu", lambda: {"uuid": "GPU-fake"})
    monkeypatch.setattr(gpu_check, "EXPERIMENTS", {k: gpu_check.miniature(v)
                                                   for k, v in gpu_check.EXPERIMENTS.items()})
    write = gpu_check.CheckCampaign._write
    monkeypatch.setattr(gpu_check.CheckCampaign, "_write",
                        lambda self, folder, exps, device: write(self, folder, exps, "cpu"))
    run = gpu_check.PartRun(PARTS["seq_vs_unified"], tmp_path, dry_run=False, budget_s=120)
    detail, numbers = gpu_check.seq_vs_unified(run)
    assert detail.startswith("G_k8: seq ") and "speedup" in detail
    assert numbers["G_k8"]["speedup"] > 0
    assert {r["executor"] for r in numbers["rows"]} == {"seq", "unified_model"}


def test_minimal_environment_imports_the_engine_and_the_gpu_tests(tmp_path):
    """In an environment holding only what a lent GPU machine has, every engine module, the
    check and every GPU test file import; only modules that need Ray may fail, and only
    for lack of Ray. (A new top-level import of Textual, plotext, tomli-w, pytest ... on
    that path fails here; CI's dry run in the same environment covers what runs.)"""
    from bench.gpu_env import build

    build(tmp_path / "env", gpu_check.GPU_MACHINE_PACKAGES)
    code = r"""
import importlib, json, pkgutil, sys
from pathlib import Path
import engine
bad, ray_only = {}, []
names = ["bench.gpu_check"] + ["tests.gpu." + p.stem for p in sorted(Path("tests/gpu").glob("test_*.py"))]
names += [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")
          if not m.name.endswith(".__main__")]  # entry points run when imported
import os
os.environ.update(json.loads(sys.argv[1]))  # what the check sets for its parts
from engine.parts.datasets import load_dataset
rows = len(load_dataset("digits").train_x)  # a cell's data path: the data folder included
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "ray":
            ray_only.append(name)
        else:
            bad[name] = repr(exc)
    except Exception as exc:
        bad[name] = repr(exc)
absent = []
for m in ("textual", "ray", "plotext", "tomli_w", "pytest", "matplotlib", "platformdirs"):
    try:
        importlib.import_module(m)
    except ImportError:
        absent.append(m)
print(json.dumps({"bad": bad, "ray_only": ray_only, "absent": absent, "n": len(names),
                  "rows": rows}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-c", code,
                          json.dumps(gpu_check.user_dirs(tmp_path / "work"))], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["absent"] == ["textual", "ray", "plotext", "tomli_w", "pytest", "matplotlib",
                             "platformdirs"]
    assert doc["rows"] > 0 and (tmp_path / "work" / "data").is_dir()
    assert doc["bad"] == {}, doc["bad"]
    assert doc["n"] > 30


def test_readme_lists_every_part_with_its_budget():
    text = (ROOT / "README.md").read_text()
    for p in PARTS.values():
        row = f"| `{p.name}` | {p.budget_s} s | {'yes' if p.default else 'named'} |"
        assert row in text, f"README's GPU section: {row}"
    assert "Ray on a GPU stays unverified" in text
