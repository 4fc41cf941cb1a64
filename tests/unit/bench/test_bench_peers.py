"""``bench.peers``: skips with one line (and writes nothing) without its environment, says
what is missing from one that exists, and its adapters build the workload the peers train
(the harness's mlp, the same samples, plain SGD lr 0.1, batch 64)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import peers

REPO = Path(__file__).resolve().parents[3]


def test_absent_environment_is_one_line_exit_0_and_nothing_written(tmp_path, capsys):
    results = tmp_path / "results"
    assert peers.main(["--env", str(tmp_path / "nope"), "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("peers: skipped: no peers environment at ")
    assert str(tmp_path / "nope") in out[0]
    assert "pip install chorus-torch==0.1.0 fugue-bench==0.1.0" in out[0]
    assert "pip install -e" in out[0]
    assert not results.exists()


def test_no_environment_named_says_how_to_name_one(monkeypatch, capsys):
    monkeypatch.delenv(peers.ENV_VAR, raising=False)
    assert peers.main([]) == 0
    [line] = capsys.readouterr().out.strip().splitlines()
    assert "no peers environment given (--env PATH or $FUGUE_PEERS_ENV)" in line


def test_an_environment_without_the_peers_names_what_it_lacks(tmp_path):
    """An interpreter with the project on its path but neither peer (a bare link to this
    suite's Python, outside its venv: torch may be missing too)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    problem = peers.env_problem(peers.env_python(str(tmp_path)))
    assert problem.startswith(f"peers environment {tmp_path} lacks chorus, fugue.core.cli")
    assert "engine" not in problem  # the project itself is found (PYTHONPATH)


def test_the_command_line_part_skips_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench.peers", "--env", str(tmp_path / "x")],
                         capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and out.stderr == ""
    assert len(out.stdout.strip().splitlines()) == 1


def test_bad_sizes_are_refused():
    with pytest.raises(SystemExit) as exc:
        peers.main(["--ks", "8,x"])
    assert exc.value.code == 2


@pytest.mark.parametrize("item,says", [
    ("MKL_CBWR", "expected NAME=VALUE"),
    ("MKL_CBWR=", "expected NAME=VALUE"),
    ("OMP_NUM_THREADS=4", "OMP_NUM_THREADS is not a dispatch setting"),
])
def test_a_bad_dispatch_setting_is_refused_in_one_line(item, says, tmp_path, capsys):
    results = tmp_path / "results"
    with pytest.raises(SystemExit) as exc:
        peers.main(["--env", str(tmp_path), "--env-var", item, "--results-dir", str(results)])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err and not results.exists()


def test_a_dispatch_setting_reaches_the_measuring_process(monkeypatch):
    """Set in the environment the measuring process starts with (MKL and ATen read it when
    torch loads), passed on as options so the rows record it."""
    seen = {}
    monkeypatch.setattr(peers, "env_problem", lambda python: None)
    monkeypatch.setattr(peers.subprocess, "run", lambda cmd, cwd, env: seen.update(
        cmd=cmd, env=env) or subprocess.CompletedProcess(cmd, 0))
    assert peers.main(["--env", "/x", "--env-var", "MKL_CBWR=COMPATIBLE", "--env-var",
                       "ATEN_CPU_CAPABILITY=avx2"]) == 0
    assert seen["env"]["MKL_CBWR"] == "COMPATIBLE"
    assert seen["env"]["ATEN_CPU_CAPABILITY"] == "avx2"
    i = seen["cmd"].index("--env-var")
    assert seen["cmd"][i:i + 4] == ["--env-var", "ATEN_CPU_CAPABILITY=avx2", "--env-var",
                                    "MKL_CBWR=COMPATIBLE"]
    assert peers.setting_text(peers.parse_env_vars(["MKL_CBWR=AVX2"])) == "MKL_CBWR=AVX2"
    assert peers.setting_text({}) == ""


def test_inner_refuses_a_setting_its_environment_lacks(monkeypatch, capsys):
    monkeypatch.delenv("MKL_CBWR", raising=False)
    assert peers.main(["--inner", "--env", "/x", "--env-var", "MKL_CBWR=COMPATIBLE"]) == 2
    assert "MKL_CBWR=COMPATIBLE is not in this process's environment" in capsys.readouterr().err


def test_the_model_is_the_harness_mlp_after_a_flatten():
    torch = pytest.importorskip("torch")
    model = peers.build_peers_mlp((1, 8, 8), 10)
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes == [(128, 64), (128,), (64, 128), (64,), (10, 64), (10,)]
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    assert isinstance(model[0], torch.nn.Flatten)


def test_our_jobs_are_the_peers_workload():
    from engine.plugins import load_builtins

    load_builtins()
    peers.register_model()
    jobs = peers.load_jobs(4, 5)
    assert len(jobs) == 4 and len({j.seed for j in jobs}) == 4
    for j in jobs:
        assert (j.model, j.model_kwargs, j.optimizer, j.optimizer_kwargs, j.lr, j.batch_size,
                j.epochs, j.dataset) == (peers.MODEL, {}, "sgd", {}, 0.1, 64, 5, "digits")


def test_harness_plugin_is_valid_python_registering_the_dataset(tmp_path):
    text = peers.HARNESS_PLUGIN.format(name=peers.HARNESS_DATASET, x=str(tmp_path / "x.pt"),
                                       y=str(tmp_path / "y.pt"))
    tree = ast.parse(text)
    decorators = [ast.unparse(d) for f in tree.body if isinstance(f, ast.FunctionDef)
                  for d in f.decorator_list]
    assert decorators == [f"register_dataset({peers.HARNESS_DATASET!r})"]


def test_figures_target_only_the_peers_stacked_variants():
    time_fig, per_tool = peers._figures(8)
    assert time_fig.baseline == "ours_unified" and time_fig.name == "time K=8"
    targeted = peers._targeted(time_fig, {v: [1.0] for v in peers.VARIANTS})
    assert {v for v, (f, _) in targeted.items() if f.target} == {"chorus_stacked",
                                                                  "harness_unified"}
    assert all(f.target == ">1" for f, _ in targeted.values() if f.target)
    assert [f.baseline for f in per_tool] == ["ours_seq", "chorus_eager", "harness_seq"]


def test_ours_also_runs_with_chorus_feed_and_says_so():
    """The shared-order variant is ours with data_order = shared (chorus's one loader),
    beside the exact default; it is measured, never the default or a target."""
    assert peers.SHARED in peers.VARIANTS and peers.SHARED == "ours_unified_shared"
    assert all(peers.SHARED not in pair for pair in peers.TOOLS.values())
    time_fig, _ = peers._figures(8)
    figure, _ = peers._targeted(time_fig, {peers.SHARED: [1.0]})[peers.SHARED]
    assert figure.target == ""

