"""The runner's command line is built in one place (engine.runner.cli.runner_argv, used by
--batch and the dashboard) and read back by the runner's own parser."""

import sys

from engine.runner.cli import build_arg_parser, overrides_from, runner_argv


def test_runner_argv_round_trips_through_the_runners_parser():
    overrides = {"runs_dir": "r", "passes": 3, "seed": None, "device": "cpu",
                 "experiments_file": None, "retries": 1}
    argv = runner_argv("c.toml", resume=True, since="20260101_000000", overrides=overrides,
                       watchdog_action="flag")
    assert argv[:4] == [sys.executable, "-m", "engine.runner", "c.toml"]
    assert "--seed" not in argv  # None: left out
    args = build_arg_parser().parse_args(argv[3:])
    assert overrides_from(args) == overrides
    assert (args.campaign, args.resume, args.since, args.watchdog_action) == \
        ("c.toml", True, "20260101_000000", "flag")
    assert runner_argv("c.toml")[3:] == ["c.toml"]


def test_values_that_look_like_flags_reach_the_runner_as_values():
    """Issue 44: ``--batch c.toml --runs-dir=-r`` passed the front end's checks (a folder
    named '-r' is a folder), made ``-r/`` in the pre-flight, then the runner's parser read
    ``--runs-dir -r`` as two flags and the run ended in its 9-line usage text."""
    overrides = {"runs_dir": "-r", "passes": None, "seed": None, "device": None,
                 "experiments_file": "--x.toml", "retries": None, "devices": "-1"}
    argv = runner_argv("-c.toml", resume=True, since="20260101_000000", overrides=overrides,
                       watchdog_action="kill")
    args = build_arg_parser().parse_args(argv[3:])
    assert args.campaign == "./-c.toml"  # the same file, not a flag
    assert (args.runs_dir, args.experiments_file, args.devices) == ("-r", "--x.toml", "-1")
