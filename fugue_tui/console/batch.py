"""``fugue-tui --batch CAMPAIGN``: the headless front end.

It validates the campaign, starts the runner process (``python -m engine.runner``), follows
the campaign's event files (``engine.observe.follow``) and feeds each event to a progress
consumer, then prints the campaign's report (``fugue_tui.report.tables``: T_group,
throughput, speedup over the baseline executor with its interval, accuracy parity, per
experiment and executor, over the campaign's ok rows) and one line per cell of this run
that did not end ok. The dashboard drives the same runner.

The progress: on a terminal the live view (:mod:`fugue_tui.console.live`); when stdout is
not a terminal, or ``FUGUE_PLAIN`` is set to anything but "" or "0", one plain line per
lifecycle event and per job epoch (:mod:`fugue_tui.console.plain`; with ``-q`` the cells'
lines only, on a terminal too); with ``--json`` JSON
lines (:mod:`fugue_tui.console.batch_json`). Each warning, the cells' and the runner's (an
executor's, a results file repaired or upgraded with its backup), goes to stderr as it
comes. ``--dry-run``: :mod:`fugue_tui.console.dry_run`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from rich.console import Console

from engine.define.campaign import load_campaign
from engine.event_base import Event
from engine.observe.follow import CampaignFollower
from engine.processes import die_with_parent, engine_env
from engine.results.columns import GROUPS_FILE
from engine.results.eager_note import eager_notes
from engine.results.preflight import check_runs_path, preflight
from engine.results.read import read_rows
from engine.results.values import row_instant, since_instant
from engine.runner.cli import runner_argv
from engine.runner.supervisor import Runner
from fugue_tui.console.dry_run import dry_run
from fugue_tui.console.plain import PlainProgress, plain_requested
from fugue_tui.live.event_text import WARNING_PREFIX

#: How long to wait for the runner to stop its cell after Ctrl-C before killing it.
RUNNER_STOP_S = 60.0


class Progress(Protocol):
    """What the follow loop feeds: :class:`PlainProgress`,
    :class:`fugue_tui.console.live.LiveProgress` or
    :class:`fugue_tui.console.batch_json.JsonProgress`. Entered around the whole run (the
    live view starts and stops its display there)."""

    def __call__(self, event: Event) -> None: ...  # each event, in the order followed

    def tick(self) -> None: ...  # after each poll: redraw, or read the new rows

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: Any) -> Any: ...


def make_progress(total: int, console: Console,
                  environ: dict[str, str] | None = None, quiet: bool = False) -> Progress:
    """The progress renderer: the live view (:class:`fugue_tui.console.live.LiveProgress`) when
    ``console`` writes to a terminal, else (or with ``FUGUE_PLAIN``) :class:`PlainProgress`;
    ``quiet`` (``-q``): the plain lines of the cells only, on a terminal too."""
    if quiet or plain_requested(environ) or not console.is_terminal or console.is_dumb_terminal:
        return PlainProgress(total, quiet=quiet)
    from fugue_tui.console.live import LiveProgress

    return LiveProgress(total, console)


def run_batch(path: str, overrides: dict[str, Any], dry: bool = False, resume: bool = False,
              since: str | None = None, shown: str | None = None,
              reuse_any: bool = False, words: Callable[[str], str] | None = None,
              as_json: bool = False, remeasure_holes: bool = False,
              quiet: bool = False) -> int:
    """Run (or, with ``dry``, list) a campaign; ``resume`` skips cells with an ok row of this
    campaign (``reuse_any``: of any campaign; ``remeasure_holes``: not a row with a monitor
    hole, :mod:`engine.runner.holes`). Exit status: the runner's — 0 every cell
    ok; 1 a cell failed, was killed or skipped; 2 bad input or a campaign already running;
    3 aborted through the control channel; 130 Ctrl-C or SIGTERM.

    ``as_json``: with ``dry`` the plan as JSON (:mod:`fugue_tui.jsonout`); else the run as
    JSON lines on stdout (:mod:`fugue_tui.console.batch_json`), the same exit status.
    ``quiet`` (``-q``): each cell's lines and the report, no job or epoch lines
    (:class:`fugue_tui.console.plain.PlainProgress`).

    ``words``: rewrites a warning about the campaign (``"<path>: <text>"``) in the words
    the user typed (``fugue-tui run`` generates the file: the warning names its flags, not
    a temporary path)."""
    from engine.plugins import load_plugins

    load_plugins()  # every name a campaign may use: built-ins and the user's plugins
    campaign = load_campaign(path, overrides)  # bad input stops here, before any process
    runner = Runner(campaign, resume=resume, since=since, reuse_any=reuse_any,
                    remeasure_holes=remeasure_holes)
    console = Console()
    for warning in campaign.warnings:
        text = f"{path}: {warning}"
        print(f"{WARNING_PREFIX}{words(text) if words else text}", file=sys.stderr)
    # How max_parallel = "auto" was resolved, where it needs saying (no profile, another
    # machine's ignored): each distinct line once, not once per cell.
    for note in dict.fromkeys(n for cell in runner.cells for n in cell.notes):
        print(f"{WARNING_PREFIX}{note}", file=sys.stderr)
    if dry:  # the real run's checks of the runs folder, writing nothing: exit 2 as it would
        check_runs_path(runner.runs_dir)
        return dry_run(runner, console, path, shown, as_json=as_json)
    preflight(runner.runs_dir)  # an unwritable runs path is bad input: exit 2, nothing started
    follower = CampaignFollower(runner.run_dir, _size(runner.folder.runner_log))
    # the rows this run writes are those stamped from now on (the closing problem lines
    # name only them, never an earlier run's rows of the same campaign)
    started = time.strftime("%Y%m%d_%H%M%S")
    proc = _start_runner(path, overrides, resume, since, reuse_any, as_json,
                         remeasure_holes=remeasure_holes)
    assert proc.stderr is not None  # a pipe: _start_runner asks for one
    relay = _relay(proc.stderr)
    progress: Progress
    if as_json:  # JSON lines on stdout, nothing else there (fugue_tui.console.batch_json)
        from fugue_tui.console.batch_json import JsonProgress, write_summary

        progress = JsonProgress(runner.runs_dir, runner.campaign_id, started)
    else:
        progress = make_progress(len(runner.cells), console, quiet=quiet)
    forward = {sig: signal.signal(sig, lambda signum, _: proc.send_signal(signum))
               for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with progress:
            _follow(proc, follower, progress)
    finally:
        for sig, previous in forward.items():
            signal.signal(sig, previous)
    relay.join(timeout=5.0)  # the runner's last words (its one-line error) come first
    code = proc.returncode
    if as_json:
        exit_code = 1 if code is not None and code < 0 else code
        problems = [] if code == 2 else _print_problems(runner, started)
        write_summary(exit_code, runner, problems)
        if code != 2:  # issue 45: buckets that trained eagerly, said on stderr (JSON: stdout)
            for note in eager_notes(_run_rows(runner, started)):
                print(f"{WARNING_PREFIX}{note}", file=sys.stderr)
    if code == 2:  # bad input or busy: the runner said why on stderr, nothing ran
        return 2
    if not as_json:
        print_summary(console, runner.runs_dir / GROUPS_FILE, runner.campaign_id)
        _print_problems(runner, started)
    _note_missing_models(runner)
    if code == 130:
        print("interrupted: the running cell was stopped and recorded as killed", file=sys.stderr)
    elif code == 3:
        print("aborted through the control channel", file=sys.stderr)
    elif code is not None and code < 0:
        print(f"the runner died (signal {-code}); its cells died with it. Run again with "
              f"--resume to finish the campaign", file=sys.stderr)
        return 1
    return code


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _start_runner(path: str, overrides: dict[str, Any], resume: bool,
                  since: str | None, reuse_any: bool = False,
                  quiet_stdout: bool = False,
                  remeasure_holes: bool = False) -> subprocess.Popen[bytes]:
    argv = runner_argv(path, resume=resume, since=since, overrides=overrides,
                       reuse_any=reuse_any, remeasure_holes=remeasure_holes)
    env = engine_env()
    # Same process group: Ctrl-C reaches the runner too; it dies if this front end is killed.
    # Its stderr comes through a pipe (:func:`_relay`). ``quiet_stdout`` (--json): whatever
    # the runner or a cell prints goes to stderr, so stdout holds only the JSON lines.
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            stdout=sys.stderr.fileno() if quiet_stdout else None,
                            preexec_fn=die_with_parent(os.getpid()))


def _relay(stream: IO[bytes]) -> threading.Thread:
    """Copy the runner's stderr, line by line, to this process's ``sys.stderr`` as it
    comes: during the live view that is the view's proxy, which prints above the view, so
    a runner's one-line error (a full disk) is not drawn over by the next refresh."""

    def copy() -> None:
        for raw in iter(stream.readline, b""):
            try:
                sys.stderr.write(raw.decode("utf-8", errors="replace"))
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
        stream.close()

    thread = threading.Thread(target=copy, name="runner-stderr", daemon=True)
    thread.start()
    return thread


def _follow(proc: subprocess.Popen[bytes], follower: CampaignFollower, progress: Progress) -> None:
    """Feed ``progress`` (PlainProgress or LiveProgress) every event until the runner
    exits; Ctrl-C is passed on to the runner, which stops its cell."""
    interrupted_at = None
    while True:
        try:
            for event in follower.poll():
                progress(event)
            progress.tick()
            if proc.poll() is not None:
                for event in follower.poll():
                    progress(event)
                return
            if interrupted_at is not None and time.monotonic() - interrupted_at > RUNNER_STOP_S:
                proc.kill()
            time.sleep(0.1)
        except KeyboardInterrupt:
            # From a terminal the runner got the same Ctrl-C; from `kill -INT` it did not:
            # pass it on (the runner ignores repeats) and let it stop its cell.
            if interrupted_at is None:
                interrupted_at = time.monotonic()
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)


def _run_rows(runner: Runner, since: str) -> list[dict[str, str]]:
    """The campaign's group rows stamped at or after ``since`` (this run's)."""
    start = since_instant(since)  # instants, never text (rows may name another zone)
    return [r for r in read_rows(runner.runs_dir / GROUPS_FILE)
            if r.get("campaign_id") == runner.campaign_id
            and (row_instant(r) or float("-inf")) >= start]


def _print_problems(runner: Runner, since: str) -> list[dict[str, Any]]:
    """One line on stderr per cell of this run (rows stamped at or after ``since``) whose
    last attempt was not ok: ``killed: D_ens seq pass 1 (attempt 1): <error>``. Rows of
    earlier runs of the same campaign are not this run's problems (an earlier ok row does
    not hide a cell this run killed, an earlier failure is not repeated)."""
    latest: dict[str, dict[str, str]] = {}
    for row in _run_rows(runner, since):
        latest[row["cell_key"]] = row
    problems = []
    for row in latest.values():
        if row.get("status") == "ok":
            continue  # its last attempt of this run succeeded
        print(f"{row['status']}: {row['exp_id']} {row['executor']} pass {row['pass']} "
              f"(attempt {row['attempt']}): {row['error']}", file=sys.stderr)
        problems.append({"status": row["status"], "exp_id": row["exp_id"],
                         "executor": row["executor"], "pass": int(row["pass"]),
                         "attempt": int(row["attempt"]), "cell_key": row["cell_key"],
                         "group_id": row.get("group_id"), "error": row["error"]})
    return problems


def _note_missing_models(runner: Runner) -> None:
    """Issue 50: one line on stderr naming the cells that asked for saved models
    (``save_models``) and have none on disk, and why (ran before saving was asked, a
    failed save): ``--resume`` does not train a done cell again only to save it."""
    from engine.models.listing import missing_models_note

    try:
        note = missing_models_note(runner.cells, read_rows(runner.runs_dir / GROUPS_FILE),
                                   runner.runs_dir, runner.campaign_id)
    except OSError as exc:  # the note never fails the run
        note = f"cannot tell which cells kept their models: {exc}"
    if note:
        print(f"{WARNING_PREFIX}{note}", file=sys.stderr)


def print_summary(console: Console, groups_csv: Path, campaign_id: str) -> None:
    """The campaign's report (:func:`fugue_tui.report.tables.print_report`): per experiment ×
    executor, T_group, throughput, energy per model, speedup over the baseline executor with
    its interval or "n/a", baseline, accuracy parity, and the speedup chart. Never fails the
    batch run: a problem reading the results is printed as one line."""
    from engine.errors import FugueError
    from fugue_tui.report.tables import NoCampaignRows, print_report

    runs_dir = Path(groups_csv).parent
    try:
        print_report(runs_dir, console, campaign_id=campaign_id)
    except NoCampaignRows:
        # Not an error: every cell was reused from another campaign or skipped, or none
        # ended before the run stopped. Say so, and where the rows are.
        print(f"summary: campaign '{campaign_id}' has no rows of its own in {runs_dir} (its "
              f"cells were skipped or reused, or none ended); `fugue-tui report {runs_dir}` "
              f"shows every campaign's", file=sys.stderr)
    except FugueError as exc:
        print(f"summary: {exc}", file=sys.stderr)
