"""``fugue-tui validate``, ``prefetch`` and ``run`` as real subprocesses: the generated cells
(dry runs, no training), one-line usage errors (exit 2, nothing written), exit codes, the
offline prefetch error, plugin workload types and executor options; one real ad-hoc run
(marked slow)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]

PLUGIN = '''
from engine.executors import ExecutorSpec, register_executor
from engine.registry import register_model
from engine.define.workloads import SplitSpec, base_fields, make_job, register_workload


@register_workload("zz_doubling", description="K jobs at doubling batch sizes")
def zz_doubling(exp, seed):
    split = SplitSpec("holdout", exp.split_seed, exp.val_fraction)
    return [make_job(exp, f"{exp.id}_b{i}", i, seed,
                     {**base_fields(exp), "batch_size": exp.batch_size * 2 ** i}, split)
            for i in range(exp.k)]


register_executor(ExecutorSpec(
    name="zz_exec", label="Test executor", color="#000000", target="not_a_module:Nothing",
    options={"workers": (int,)}, option_help={"workers": "how many worker processes"},
    description="declared by a test plugin"))


@register_model("zz_needs_extra", requires="zz_not_installed_module")
def build(in_shape, n_outputs, **kwargs):
    raise AssertionError("never built")
'''



def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_REGISTRY_DIR", "FUGUE_PLUGINS", "FUGUE_DATA_DIR")}
    env["COLUMNS"] = "1000"  # rich tables on one line per row
    env["FUGUE_PLAIN"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def fugue(cwd: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert result.stdout == ""
    return lines[0]


def dry_cells(result: subprocess.CompletedProcess) -> list[dict[str, str]]:
    """The rows of the dry run's cell table."""
    assert result.returncode == 0, (result.stdout, result.stderr)
    cells = []
    for line in result.stdout.splitlines():
        parts = [p.strip() for p in line.split("│")[1:-1]]
        if len(parts) == 8 and parts[0].isdigit():
            cells.append(dict(zip(("index", "exp", "executor", "compile", "pass", "jobs", "key",
                                   "would"), parts, strict=False)))
        elif len(parts) == 9 and parts[0].isdigit():  # with a variant (scheduler, rung) column
            cells.append(dict(zip(("index", "exp", "executor", "variant", "compile", "pass",
                                   "jobs", "key", "would"), parts, strict=False)))
    return cells


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def _plugin_env(tmp_path: Path, source: str = PLUGIN, name: str = "zz_cli_plugin") -> dict:
    folder = tmp_path / "plugins"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    env = _env(FUGUE_PLUGINS=name)
    env["PYTHONPATH"] = os.pathsep.join((str(folder), env["PYTHONPATH"]))
    return env


# --------------------------------------------------------------------------- run: the matrix

def test_adhoc_cv_is_one_cell_of_k_jobs_and_a_dry_run_writes_nothing(workdir):
    result = fugue(workdir, "run", "--model", "mlp", "--dataset", "wine", "--type", "cv",
                   "--k", "3", "--epochs", "1", "--exec", "seq", "--dry-run")
    cells = dry_cells(result)
    assert [(c["exp"], c["executor"], c["jobs"], c["would"]) for c in cells] == [
        ("adhoc", "seq", "3", "run")]
    assert snapshot(workdir) == set()


def test_catalogue_selection_times_passes(workdir):
    cells = dry_cells(fugue(workdir, "run", "--exp", "D_ens,D_cv", "--exec", "seq",
                            "--passes", "2", "--dry-run"))
    assert [(c["exp"], c["pass"], c["jobs"]) for c in cells] == [
        ("D_ens", "1", "5"), ("D_cv", "1", "5"), ("D_ens", "2", "5"), ("D_cv", "2", "5")]
    assert snapshot(workdir) == set()


def test_compile_both_and_ids_given_apart(workdir):
    cells = dry_cells(fugue(workdir, "run", "--exp", "D_ens", "D_reg", "--exec", "seq",
                            "--compile", "both", "--dry-run"))
    assert [(c["exp"], c["compile"]) for c in cells] == [
        ("D_ens", "off"), ("D_ens", "default"), ("D_reg", "off"), ("D_reg", "default")]
    # the flag alone means on, with the compile mode asked for
    cells = dry_cells(fugue(workdir, "run", "--exp", "D_ens", "--compile", "--compile-mode",
                            "reduce-overhead", "--dry-run"))
    assert [c["compile"] for c in cells] == ["reduce-overhead"]


def test_adhoc_hpo_grid_multi_model_pairs_and_a_name(workdir):
    cells = dry_cells(fugue(workdir, "run", "--model", "mlp", "--dataset", "digits",
                            "--search-space", "lr=0.1,0.01", "batch_size=16,32,64",
                            "--epochs", "1", "--dry-run"))
    assert [(c["exp"], c["jobs"]) for c in cells] == [("adhoc", "6")]  # hpo inferred: 2 × 3
    cells = dry_cells(fugue(workdir, "run", "--type", "multi_model", "--model", "mlp", "mlp_bn",
                            "--dataset", "wine", "digits", "--epochs", "1", "--dry-run"))
    assert [(c["exp"], c["jobs"]) for c in cells] == [("adhoc", "2")]
    cells = dry_cells(fugue(workdir, "run", "--model", "mlp", "--dataset", "wine", "--k", "2",
                            "--name", "wine_try", "--exp", "D_ens", "--dry-run"))
    assert [(c["exp"], c["jobs"]) for c in cells] == [("D_ens", "5"), ("wine_try", "2")]


# --------------------------------------------------------------------------- run: usage errors

@pytest.mark.parametrize("args, needles", [
    (["--model", "mlp", "--dataset", "digits", "--type", "hpo", "--search-space",
      "learning_rate=0.1"], ["'learning_rate' is not a job field", "did you mean 'lr'"]),
    (["--exp", "D_ens", "--exec", "unified_model", "--sweep", "all"],
     ["--sweep", "invalid choice: 'all'"]),
    ([], ["nothing to run", "--exp"]),
    (["--exp", "D_ens", "--epochs", "3"], ["--epochs", "--model"]),
    (["--exp", "D_enz"], ["--exp", "unknown experiment 'D_enz'", "did you mean 'D_ens'"]),
    (["--exp", "D_ens", "--exec", "sequ"], ["unknown executor 'sequ'", "did you mean 'seq'"]),
    (["--model", "mlp", "--dataset", "wien"], ["unknown dataset 'wien'", "did you mean 'wine'"]),
    (["--model", "mlpp", "--dataset", "wine"], ["unknown model 'mlpp'", "did you mean 'mlp'"]),
    (["--model", "mlp", "--dataset", "wine", "--type", "ensembel"],
     ["'type'", "did you mean 'ensemble'"]),
    (["--model", "mlp", "--dataset", "wine", "--k", "0"], ["'k'", "got 0"]),
    (["--model", "mlp", "--dataset", "wine", "--epochs", "0"], ["'epochs'", "got 0"]),
    (["--model", "mlp", "--dataset", "wine", "--name", "E01"], ["--name 'E01'", "catalogue"]),
    (["--model", "mlp", "--dataset", "wine", "--search-space", "lr"], ["--search-space", "lr"]),
    (["--model", "mlp", "mlp_bn", "lenet", "--dataset", "wine", "digits", "--type",
      "multi_model"], ["3 models and 2 datasets"]),
    (["--model", "mlp", "--dataset", "digits", "--type", "hpo", "--k", "3",
      "--search-space", "lr=0.1"], ["--k does not apply"]),
    (["--model", "mlp", "--dataset", "wine", "--batch-size", "500"], ["batch_size 500"]),
    (["--exp", "D_ens", "--since", "20260101_000000"], ["--since", "--resume"]),
    (["--exp", "D_ens", "--compile-mode", "fast"], ["--compile-mode", "'fast'"]),
    (["--exp", "D_ens", "--option", "seq.workers=2"], ["seq", "unknown key 'workers'"]),
    (["--exp", "D_ens", "--option", "nonsense"], ["--option", "EXEC.KEY=VALUE"]),
    (["--exp", "D_ens", "--passes", "0"], ["--passes"]),
    (["--exp", "D_ens", "--device", "gpu"], ["--device", "'gpu'"]),
])
def test_usage_errors_are_one_line_exit_2_and_write_nothing(workdir, args, needles):
    result = fugue(workdir, "run", *args, "--runs-dir", "runs")
    line = assert_one_line_error(result, *needles)
    assert "fugue-run-" not in line  # the generated files are never named
    assert snapshot(workdir) == set()


# --------------------------------------------------------------------------- plugins

def test_plugin_workload_type_and_executor_options(tmp_path, workdir):
    env = _plugin_env(tmp_path)
    cells = dry_cells(fugue(workdir, "run", "--model", "mlp", "--dataset", "wine", "--type",
                            "zz_doubling", "--k", "3", "--batch-size", "8", "--exec", "seq",
                            "zz_exec", "--option", "zz_exec.workers=2", "--dry-run", env=env))
    assert [(c["executor"], c["jobs"]) for c in cells] == [("seq", "3"), ("zz_exec", "3")]
    assert_one_line_error(fugue(workdir, "run", "--model", "mlp", "--dataset", "wine", "--type",
                                "zz_doubling", "--k", "2", "--batch-size", "8", "--exec",
                                "zz_exec", "--option", "zz_exec.workers=two", env=env),
                          "workers", "integer")
    helped = fugue(workdir, "run", "--help", env=env)
    assert helped.returncode == 0
    assert "zz_exec  Test executor: declared by a test plugin" in helped.stdout
    assert "workers (int): how many worker processes" in helped.stdout
    assert "zz_doubling" in helped.stdout
    # the catalogue accepts the type, and expansion goes through the registry
    code = ("from engine.plugins import load_plugins; load_plugins()\n"
            "from engine.define.catalogue import load_catalogue\n"
            "from engine.define.workloads import expand\n"
            f"cat = load_catalogue({str(tmp_path / 'e.toml')!r})\n"
            "print([(j.job_id, j.seed, j.batch_size) for j in expand(cat.get('Z1'), 7)])\n")
    (tmp_path / "e.toml").write_text('[experiments.Z1]\ntype = "zz_doubling"\nmodel = "mlp"\n'
                                     'dataset = "wine"\nk = 3\nbatch_size = 4\nepochs = 1\n'
                                     'lr = 0.1\n')
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[('Z1_b0', 7, 4), ('Z1_b1', 8, 8), ('Z1_b2', 9, 16)]"
    assert snapshot(workdir) == set()


def test_executor_flags_go_to_the_executors_that_declare_them(workdir):
    cells = dry_cells(fugue(workdir, "run", "--exp", "D_hpo", "--exec", "seq", "ray",
                            "--scheduler", "fifo", "asha", "--dry-run"))
    # Issue 25: seq takes early-stopping schedulers too: one cell per scheduler for each.
    assert [c["executor"] for c in cells] == ["seq", "seq", "ray", "ray"]
    cells = dry_cells(fugue(workdir, "run", "--exp", "D_ens", "--exec", "unified_model",
                            "--sweep", "ablation", "--dry-run"))
    assert len(cells) == 6  # the six rungs of the ablation ladder
    out = fugue(workdir, "run", "--exp", "D_ens", "--exec", "seq", "--sweep", "ablation",
                "--dry-run")
    assert out.returncode == 0
    assert "--sweep applies to 'unified_model', which this run does not use (--exec seq): " \
        "ignored" in out.stderr
    assert len(dry_cells(out)) == 1
    assert_one_line_error(fugue(workdir, "run", "--exp", "D_ens", "--exec", "mp",
                                "--max-parallel", "0"), "--max-parallel")
    assert_one_line_error(fugue(workdir, "run", "--exp", "D_ens", "--exec", "ray",
                                "--scheduler", "fastest"), "--scheduler", "invalid choice")


# --------------------------------------------------------------------------- validate

def test_validate_lists_everything_and_exits_1_when_one_cannot_run(tmp_path, workdir):
    env = _plugin_env(tmp_path)
    data = tmp_path / "data"
    env["FUGUE_DATA_DIR"] = str(data)
    (tmp_path / "e.toml").write_text('[experiments.X1]\ntype = "ensemble"\nmodel = '
                                     '"zz_needs_extra"\ndataset = "wine"\nk = 2\nbatch_size = '
                                     '8\nepochs = 1\nlr = 0.1\n')
    result = fugue(workdir, "validate", "--experiments-file", str(tmp_path / "e.toml"), env=env)
    # exit 1: E01 (no data) and X1 cannot run here; `validate all` says the same (issue 29)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    by_id = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert by_id["D_ens"].split() == ["D_ens", "ok"]
    cifar = by_id["E01"]
    # one line each: the data root and its note once in the heading, the paths in --json
    assert f"FUGUE_DATA_DIR={data}" in lines[0] and f"FUGUE_DATA_DIR={data}" not in cifar
    assert cifar.split(None, 1)[1] == "no: CIFAR-10 not found (fugue-tui prefetch E01)"
    assert "model 'transformer' is not registered" in by_id["E17"]
    assert "needs zz_not_installed_module: pip install zz_not_installed_module" in by_id["X1"]
    text = result.stdout
    for heading in ("models: ", "datasets: ", "tasks: ", "optimizers: ", "executors: ",
                    "workload types: ", "plugins: zz_cli_plugin"):
        assert heading in text, heading
    assert "zz_doubling" in text and "zz_exec [options: workers]" in text
    assert not data.exists()  # validating reads, never creates


def test_validate_selector_exit_codes(tmp_path, workdir):
    env = _env(FUGUE_DATA_DIR=str(tmp_path / "no-data"))
    assert fugue(workdir, "validate", "D_ens,D_cv", env=env).returncode == 0
    result = fugue(workdir, "validate", "E01", "D_ens", env=env)
    assert result.returncode == 1
    assert "E01" in result.stdout and "1 of 2 experiments can run here" in result.stdout
    assert_one_line_error(fugue(workdir, "validate", "E99", env=env), "unknown experiment 'E99'")


# --------------------------------------------------------------------------- prefetch

def _offline(tmp_path: Path) -> dict[str, str]:
    """No network whatever this machine has: every URL goes through a proxy that refuses."""
    skl = tmp_path / "sklearn-home"
    skl.mkdir(exist_ok=True)
    return _env(http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
                HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",
                no_proxy="", NO_PROXY="", SCIKIT_LEARN_DATA=str(skl))


def test_prefetch_offline_is_one_clear_line_exit_2_and_leaves_nothing(tmp_path, workdir):
    data = tmp_path / "data"
    data.mkdir()
    # a temporary folder left by a prefetch that was killed (its process is gone)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (data / f".prefetch-cal_housing-{dead.pid}-x1y2").mkdir()
    (data / f".prefetch-cal_housing-{dead.pid}-x1y2" / "cal_housing.tgz").write_bytes(b"half")
    result = fugue(workdir, "prefetch", "E05", "D_mm", "--data-dir", str(data),
                   env=_offline(tmp_path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    failed = [line for line in lines if line.startswith("cal_housing: ")]
    assert len(failed) == 1 and failed[0].startswith(
        "cal_housing: download failed (no network?): "), result.stdout
    assert "digits: bundled with scikit-learn, nothing to fetch" in lines
    assert sorted(p.name for p in data.iterdir()) == []  # nothing partial, nothing stale
    assert snapshot(workdir) == set()


def test_prefetch_skips_present_datasets(tmp_path, workdir):
    data = tmp_path / "data"
    data.mkdir()
    (data / "cal_housing_py3.pkz").write_bytes(b"cached")
    result = fugue(workdir, "prefetch", "E05", "E17", "--data-dir", str(data),
                   env=_offline(tmp_path))
    assert result.returncode == 0, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert "cal_housing: present, skipped" in lines
    # a dataset only a plugin provides is not a download failure
    assert any(line.startswith("wikitext: not registered, skipped") for line in lines)
    assert sorted(p.name for p in data.iterdir()) == ["cal_housing_py3.pkz"]


def test_every_subcommand_has_help(workdir):
    for command in ("validate", "prefetch", "run", "list", "report", "control"):
        result = fugue(workdir, command, "--help")
        assert result.returncode == 0 and "usage: fugue-tui" in result.stdout, command


# --------------------------------------------------------------------------- a real run

@pytest.mark.slow
def test_adhoc_run_end_to_end(tmp_path, workdir):
    result = fugue(workdir, "run", "--model", "mlp", "--dataset", "wine", "--type", "cv",
                   "--k", "2", "--epochs", "1", "--exec", "seq", "--threads", "1", "--device",
                   "cpu", env=_env(FUGUE_DATA_DIR=str(tmp_path / "no-data")), timeout=300)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    runs = workdir / "runs"
    with open(runs / "master_groups.csv", newline="") as f:
        groups = list(csv.DictReader(f))
    with open(runs / "master_individual.csv", newline="") as f:
        jobs = list(csv.DictReader(f))
    assert [(g["exp_id"], g["executor"], g["mode"], g["K"], g["status"]) for g in groups] == [
        ("adhoc", "seq", "cv", "2", "ok")]
    assert sorted(j["job_id"] for j in jobs) == ["adhoc_fold0", "adhoc_fold1"]
    assert {j["exp_id"] for j in jobs} == {"adhoc"}
    # the generated campaign is kept like any campaign, named after its definition
    (campaign,) = (runs / ".adhoc").glob("run-adhoc-*[0-9a-f].toml")
    assert (runs / ".adhoc" / f"{campaign.stem}.experiments.toml").is_file()
    assert (runs / campaign.stem / "campaign.toml").read_bytes() == campaign.read_bytes()
    assert {g["campaign_id"] for g in groups} == {campaign.stem}


def test_a_planned_flag_says_which_executors_it_is_for():
    from fugue_tui.commands.run_flags import _targets_help

    everyone = ["seq", "mp", "ray", "unified_model"]
    assert _targets_help(("ray", "seq", "mp", "unified_model"), everyone) == "for every executor"
    assert _targets_help(("ray",), everyone) == "for ray only"
    assert _targets_help(("ray", "gpu_pack"), everyone) == "for ray and gpu_pack only (not built yet)"
