"""Launching a plan from the dashboard, Textual-free: validate it, attach to the campaign's
runner when one is already running, else check the runs folder, keep the plan as a campaign
file and start the runner detached (:mod:`fugue_tui.app.process`).

Blocking (file system, a process start): the plan screen calls :func:`launch_plan` from a
thread worker and posts what it returns, or the error it raises, as a
:class:`fugue_tui.app.messages.Launched`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import FugueError
from fugue_tui.app.models.plan import PlanDoc, parse_plan, save_plan

if TYPE_CHECKING:  # the process module (psutil) loads when a launch starts, as before
    from fugue_tui.app.process import RunnerHandle


@dataclass(frozen=True)
class Launch:
    """A started (or found) runner: its ``run_dir``, its ``handle``, the byte ``offset`` in
    ``runner.jsonl`` where its session begins, and ``attach`` when it was running already
    (the dashboard attaches to it instead of starting another)."""

    run_dir: str
    handle: RunnerHandle
    offset: int
    attach: bool = False


class LaunchFailed(FugueError):
    """The plan could not be launched: the message says why; ``run_dir`` is the campaign's
    run folder, or ``""`` when the plan did not validate far enough to name one."""

    def __init__(self, run_dir: str, message: str) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def launch_plan(doc: PlanDoc, resume: bool, saved: tuple[Path, PlanDoc] | None) -> Launch:
    """Start the runner of plan ``doc`` (``resume``: only cells without an ok row), or
    attach to the one already running for its run folder.

    ``saved``: the campaign file the plan was last loaded from or saved to and the document
    it held; when ``doc`` is still that document the runner reads that file, else the plan
    as edited is written beside the runs (``<runs_dir>/.dashboard/<name>.toml``) as
    ``fugue-tui run`` does.

    Raises:
        LaunchFailed: the plan does not validate, the runs folder fails the preflight, the
            file cannot be written or the runner not started (the message is the cause's).
    """
    from engine.observe.follow import last_session_offset
    from engine.results.preflight import preflight
    from engine.runfolder import RunFolder
    from engine.runner.cli import runner_argv
    from fugue_tui.app.process import find_runner, start_runner

    run_dir = ""
    try:
        campaign = parse_plan(doc)
        run_dir = str(Path(campaign.runs_dir) / campaign.name)
        existing = find_runner(run_dir)
        if existing is not None:
            return Launch(run_dir, existing, last_session_offset(run_dir), attach=True)
        preflight(campaign.runs_dir)
        if saved is not None and doc == saved[1]:
            path = saved[0]
        else:  # the plan as edited, kept beside the runs like `fugue-tui run` does
            path = save_plan(doc, Path(campaign.runs_dir) / ".dashboard" /
                             f"{campaign.name}.toml")
        runner_log = RunFolder(Path(run_dir)).runner_log
        offset = runner_log.stat().st_size if runner_log.exists() else 0
        argv = runner_argv(path, resume=resume,
                           watchdog_action=(doc.get("watchdog") or {}).get("action"))
        handle = start_runner(run_dir, argv)
    except (FugueError, OSError) as exc:
        raise LaunchFailed(run_dir, str(exc)) from exc
    return Launch(run_dir, handle, offset)
