"""The command line's conventions (issue 29), each as a real ``fugue-tui`` subprocess:
a closed pipe ends every command quietly, bare ``fugue-tui`` without a terminal exits 2,
``control`` refuses to queue a command no runner will read, top-level overrides are
refused where nothing uses them or where the sub-command's own flag says otherwise, an
unknown option before the command names the command that has it, ``-V``, descriptions,
``bench PART --help``, ``validate``'s exit status, ``run``'s warnings in the flags' words,
spelled-out option defaults keep the cell key, ``report --width 40`` and 80-column help.
Nothing trains here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import __version__

REPO = Path(__file__).resolve().parents[4]
HARNESS = REPO / "tests" / "fixtures" / "fugue-harness-cpu"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUGUE_REGISTRY_DIR", "FUGUE_PLUGINS", "FUGUE_DATA_DIR", "NO_COLOR")}
    env["COLUMNS"] = "1000"
    env["FUGUE_PLAIN"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def fugue(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fugue_tui", *args], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def one_line_error(proc: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fugue-tui: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# --------------------------------------------------------------------------- SIGPIPE

@pytest.mark.parametrize("args", [
    ("validate",),           # print()
    ("list",),               # rich
    ("--help",),             # argparse (which swallows a failed write on its own)
    ("report", str(HARNESS)),
], ids=lambda a: "-".join(a[:2]).strip("-").replace("/", "_")[:30])
def test_a_closed_pipe_ends_every_command_quietly(args):
    """`fugue-tui validate | head -1`: the reader is gone before the first write (the
    read end is closed at once, so the write fails however short the output)."""
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "fugue_tui", *args], cwd=REPO, env=_env(),
                            stdout=write, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(write)
    os.close(read)
    _, err = proc.communicate(timeout=120)
    assert err.decode() == "", err.decode()  # no BrokenPipeError traceback, no warning
    assert proc.returncode == 128 + signal.SIGPIPE


# --------------------------------------------------------------------------- exit codes

def test_bare_fugue_tui_without_a_terminal_prints_usage_and_exits_2():
    proc = fugue()
    assert proc.returncode == 2
    assert proc.stdout.startswith("usage: fugue-tui")
    assert "needs a terminal" in proc.stderr and "--batch" in proc.stderr


def test_version_short_and_long():
    for flag in ("-V", "--version"):
        proc = fugue(flag)
        assert proc.returncode == 0 and proc.stdout.strip() == f"fugue-tui {__version__}"


def test_validate_exit_status_depends_on_the_experiments_not_on_their_spelling(tmp_path):
    env = _env(FUGUE_DATA_DIR=str(tmp_path / "no-data"))  # E01.. cannot run here
    bare, every = fugue("validate", env=env), fugue("validate", "all", env=env)
    assert bare.returncode == every.returncode == 1
    assert bare.stdout.splitlines()[-1] == every.stdout.splitlines()[-1]
    # (a selection that can run exits 0, an unknown one 2: tests/unit/fugue_tui/commands/test_commands.py)


# --------------------------------------------------------------------------- control

def _run_folder(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "c1"
    run_dir.mkdir(parents=True)
    (run_dir / "runner.jsonl").write_text("")
    return run_dir


def test_control_without_a_runner_sends_nothing_and_exits_1(tmp_path):
    run_dir = _run_folder(tmp_path)
    line = one_line_error(fugue("control", str(run_dir), "kill", "1"), code=1)
    assert "no runner is running" in line and "'kill 1' was not sent" in line
    assert not (run_dir / "control").exists()  # nothing queued for a later runner
    # a runner.pid left by a runner that died (its pid no longer a runner): the same
    (run_dir / "runner.pid").write_text(json.dumps(
        {"pid": os.getpid(), "host": os.uname().nodename, "started": time.time()}))
    one_line_error(fugue("control", str(run_dir), "abort"), "'abort' was not sent", code=1)
    assert not (run_dir / "control").exists()


def test_control_with_a_live_runner_queues_the_command(tmp_path):
    run_dir = _run_folder(tmp_path)
    # a process whose command line is a runner's (what the check looks for), alive
    fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             "-m", "engine.runner"])
    try:
        (run_dir / "runner.pid").write_text(json.dumps(
            {"pid": fake.pid, "host": os.uname().nodename, "started": time.time()}))
        proc = fugue("control", str(run_dir), "abort")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("sent abort")
        assert len(list((run_dir / "control").glob("*.json"))) == 1
    finally:
        fake.kill()
        fake.wait()


# --------------------------------------------------------------------------- flags

def test_top_level_override_refused_where_no_command_uses_it():
    one_line_error(fugue("--passes", "3", "list"), "--passes does not apply to 'list'",
                   "--batch and run")
    one_line_error(fugue("--seed", "1", "validate"), "--seed does not apply to 'validate'")
    one_line_error(fugue("--runs-dir", "x", "validate"), "--runs-dir does not apply")


def test_the_same_setting_before_and_after_the_command_must_agree(tmp_path):
    one_line_error(fugue("--passes", "3", "run", "--exp", "D_ens", "--passes", "5",
                         "--dry-run"), "--passes given twice", "3 before 'run'", "5 after")
    one_line_error(fugue("--runs-dir", str(tmp_path / "a"), "report", str(tmp_path / "b")),
                   "RUNS_DIR", "--runs-dir", "different folders")
    one_line_error(fugue("--runs-dir", "a", "report", "--runs-dir", "b"),
                   "--runs-dir given twice")
    # the same value twice is no conflict
    same = fugue("--passes", "2", "run", "--exp", "D_ens", "--passes", "2", "--dry-run")
    assert same.returncode == 0, same.stderr
    assert "2 cells" in same.stdout


def test_an_unknown_option_before_the_command_names_its_command():
    line = one_line_error(fugue("--batch", "x.toml", "--option", "foo"),
                          "unrecognized option '--option'", "fugue-tui run",
                          "campaign file")
    assert "invalid choice" not in line
    one_line_error(fugue("--pases", "3"), "'--pases'", "did you mean '--passes'")


def test_descriptions_and_bench_usage():
    for command, needle in (("control", "no runner is running"), ("list", "catalogue")):
        proc = fugue(command, "--help")
        assert proc.returncode == 0
        body = proc.stdout.split("\n\n")[1]  # the description paragraph after the usage
        assert needle in " ".join(body.split()), body
    bench = fugue("bench", "fixed_cost", "--help")
    assert bench.returncode == 0 and bench.stdout.startswith("usage: fugue-tui bench fixed_cost")
    assert "python -m" not in bench.stdout.splitlines()[0]


def test_help_fits_80_columns(monkeypatch):
    from fugue_tui.cli import build_parser

    monkeypatch.setenv("COLUMNS", "80")  # argparse and the run epilog wrap to it
    parser = build_parser()
    helps = {"": parser.format_help()}
    for action in parser._actions:  # noqa: SLF001
        for name, sub in (getattr(action, "choices", None) or {}).items():
            if hasattr(sub, "format_help"):
                helps[name] = sub.format_help()
    assert {"run", "validate", "control", "list", "report", "bench", "completion"} <= set(helps)
    long = {name: line for name, text in helps.items() for line in text.splitlines()
            if len(line) > 80}
    assert not long, long


def test_validate_and_list_fit_80_columns(tmp_path):
    env = _env(COLUMNS="80", FUGUE_DATA_DIR=str(tmp_path / "no-data"))
    for args in (("validate",), ("list",), ("bench",)):
        proc = fugue(*args, env=env)
        long = [line for line in proc.stdout.splitlines() if len(line) > 80
                and " " in line.strip()]  # a single long word (a path) may not fold
        assert not long, (args, long)
        assert "fugue-tui prefetch E01" in " ".join(proc.stdout.split()) or args != ("validate",)


# --------------------------------------------------------------------------- run

def test_run_warnings_name_the_flags_not_a_temporary_file():
    proc = fugue("run", "--exp", "D_ens", "--exec", "seq", "ray", "--scheduler", "asha",
                 "--dry-run")
    assert proc.returncode == 0, proc.stderr
    warning = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warning == ["fugue-tui: warning: --scheduler applies to hpo experiments only; "
                       "none is selected, so ray runs each experiment once without a "
                       "scheduler"]
    assert "/tmp" not in proc.stderr and ".toml" not in proc.stderr


def _keys(*args: str) -> list[str]:
    proc = fugue("run", "--exp", "D_ens", "--dry-run", *args)
    assert proc.returncode == 0, proc.stderr
    return re.findall(r"\b[0-9a-f]{16}\b", proc.stdout)


def test_a_spelled_out_default_option_keeps_the_cell_key_on_the_command_line():
    plain = _keys("--exec", "mp")
    assert plain and _keys("--exec", "mp", "--option", "mp.mps=auto") == plain


def _campaign_keys(tmp_path: Path, executor: str, options: str) -> list[str]:
    from engine.define.campaign import load_campaign
    from engine.runner.supervisor import Runner

    path = tmp_path / f"c{len(list(tmp_path.iterdir()))}.toml"
    path.write_text(f'experiments = "D_ens,D_hpo"\nexecutors = ["{executor}"]\n'
                    f'[options.{executor}]\n{options}\n')
    return [c.key for c in Runner(load_campaign(path)).cells]


@pytest.mark.parametrize("executor, defaults, other", [
    ("mp", 'mps = "auto"\nstart = "forkserver"', 'mps = "off"'),
    ("ray", 'scheduler = "fifo"\ngrace_period = 1\nreduction_factor = 2\n'
            'reuse_actors = true', "grace_period = 2"),
    ("unified_model", 'verify = true\nkernels = "batched"\nfeatures = "vf:1,s:1,fl:0"\n'
                      'sweep = "none"\nretire = "remove"\nbaseline = false',
     'kernels = "exact"'),
])
def test_spelled_out_option_defaults_keep_the_cell_key(tmp_path, executor, defaults, other):
    plain = _campaign_keys(tmp_path, executor, "")
    assert plain and _campaign_keys(tmp_path, executor, defaults) == plain
    # a value that is not the default still makes another cell
    assert _campaign_keys(tmp_path, executor, other) != plain


# --------------------------------------------------------------------------- report

def test_report_narrower_than_the_chart_prints_the_table_only_and_says_so():
    narrow = fugue("report", str(HARNESS), "--width", "40")
    assert narrow.returncode == 0, narrow.stderr
    assert "speedup chart left out: 40 columns are fewer than the" in \
        " ".join(narrow.stdout.split())
    assert "┤" not in narrow.stdout  # no bar drawn
    from rich.console import Console

    from fugue_tui.report.tables import print_report

    console = Console(width=100, record=True, color_system=None)  # wide enough: drawn
    print_report(HARNESS, console, width=100)
    wide = console.export_text()
    assert "speedup over seq (ratio of mean T_group; 1 = seq)" in wide
    assert "left out" not in wide
