"""``fugue-tui --batch CAMPAIGN``: the headless front end.

It validates the campaign, starts the runner process (``python -m engine.runner``), follows
the campaign's event files (``engine.observe.follow``) and prints one plain line per lifecycle
event and per job epoch (each warning, the cells' and the runner's, on stderr as it comes:
an executor's, a results file repaired or upgraded with its backup), then the campaign's report (``fugue_tui.report.tables``: T_group,
throughput, speedup over seq with its interval, accuracy parity, per experiment and
executor, over the campaign's ok rows). The dashboard drives the same runner.

On a terminal the progress is a live view instead (``fugue_tui.console.live``: the same events
applied to ``engine.observe.state``); when stdout is not a terminal, or ``FUGUE_PLAIN`` is set to
anything but "" or "0", the plain lines are printed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from engine.define.campaign import load_campaign
from engine.events import is_runner_event
from engine.observe.follow import CampaignFollower
from engine.processes import die_with_parent, engine_env
from engine.results.columns import GROUPS_FILE
from engine.results.preflight import check_runs_path, preflight
from engine.results.read import read_rows
from engine.runner.cli import runner_argv
from engine.runner.supervisor import Runner
from fugue_tui.console.live import warning_line

#: How long to wait for the runner to stop its cell after Ctrl-C before killing it.
RUNNER_STOP_S = 60.0


class PlainProgress:
    """Event consumer writing short lines (one per lifecycle event and epoch end) to
    ``stream``, and each ``warning`` event (a cell's or the runner's) to stderr as it comes
    (:func:`fugue_tui.console.live.warning_line`)."""

    def __init__(self, total: int, stream=None):
        self.total = total
        self.stream = stream or sys.stdout
        #: Cell labels by key, from the runner's events (a cell's warning names its cell).
        self.labels: dict[str, str] = {}
        #: Campaign indices by cell key (a control line names the cell as [i/N]).
        self.indices: dict[str, int] = {}
        #: The index of the cell started last (0: none yet).
        self.current = 0
        #: "[i/N] ...: skipped" lines of queued cells skipped by a control command, held
        #: until their turn (index order), so that [5/6] does not come before [4/6].
        self.held: dict[int, str] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        try:
            if is_runner_event(event) and event.get("label") and event.get("cell"):
                self.labels[event["cell"]] = event["label"]
            if is_runner_event(event) and event.get("cell") and isinstance(
                    event.get("index"), int):
                self.indices[event["cell"]] = event["index"]
            warning = warning_line(event, self.labels.get(event.get("cell") or "", ""))
            line = self.line(event) if warning is None else None
            line = self._in_order(event, line)
        except (KeyError, TypeError, ValueError) as exc:  # a display bug must not stop a campaign
            warning = None
            line = f"    (event {event.get('type')!r} not shown: {type(exc).__name__}: {exc})"
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
        if line is not None:
            print(line, file=self.stream, flush=True)

    def tick(self) -> None:
        """Nothing to redraw: lines are printed as events arrive."""

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._flush(None)  # a campaign stopped early still says what was skipped
        return None

    def _in_order(self, event: dict[str, Any], line: str | None) -> str | None:
        """Hold a control skip of a queued cell until the cells before it started; print
        what is held before the next cell's start line and at the campaign's end."""
        kind = event.get("type")
        if not is_runner_event(event):
            return line
        if (kind == "skipped" and line is not None and isinstance(event.get("index"), int)
                and event["index"] > self.current + 1
                and "control command" in str(event.get("reason") or "")):
            self.held[event["index"]] = line
            return None
        if kind == "cell_started" and isinstance(event.get("index"), int):
            self.current = max(self.current, event["index"])
            self._flush(event["index"])
        elif kind in ("campaign_done", "campaign_aborted"):
            self._flush(None)
        return line

    def _flush(self, before: int | None) -> None:
        """Print the held lines of cells before index ``before`` (None: all), in order."""
        for index in sorted(i for i in self.held if before is None or i < before):
            print(self.held.pop(index), file=self.stream, flush=True)

    def _cell_text(self, key: str) -> str:
        """``[5/6] my_cv mp pass 1`` for a cell key the runner announced, else the key."""
        index, label = self.indices.get(key), self.labels.get(key)
        if index is None or not label:
            return key
        return f"[{index}/{self.total}] {label}"

    def line(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        runner = is_runner_event(event)
        if kind == "campaign_started":
            resume = ", resuming" if event.get("resume") else ""
            return (f"campaign {event['campaign']}: {event['cells']} cells, device "
                    f"{event['device']}{resume}, run folder {event['run_dir']}")
        if kind == "cell_started":
            return f"[{event['index']}/{self.total}] {event['label']} (attempt {event['attempt']})"
        if kind == "phase" and event.get("phase") == "data_load":
            return f"    datasets loaded in {event['seconds']:.2f} s"
        if kind == "job_progress" and event.get("epoch_end"):
            extra = f"  val_acc {event['val_acc']:.3f}" if event.get("val_acc") is not None else ""
            return (f"    {event['job_id']}  epoch {event['epoch']}/{event['epochs']}  "
                    f"loss {event['loss']:.4f}{extra}  {event.get('train_sps', 0):,.0f} samples/s")
        if kind == "summary":
            throughput = event.get("throughput_group")
            line = f"    T_group {event['T_group']:.2f} s"
            if throughput is not None:
                line += f"  throughput {throughput:,.0f} samples/s"
            line += f"  status {event['status']}"
            for warning in event.get("warnings") or []:
                line += f"\n    warning: {warning}"
            return line
        if not runner:
            return None
        if kind == "skipped":
            return f"[{event['index']}/{self.total}] {event['label']}: skipped, {event['reason']}"
        if kind in ("suspect", "hung"):
            return f"    cell {kind}: {event['seen']}"
        if kind == "retried":
            how = "manual retry" if event.get("manual") else f"retry {event['retry']}/{event['retries']}"
            return f"    {how}: attempt {event['attempt']} next"
        if kind == "killed":
            return f"    cell killed: {event['reason']}"
        if kind == "failed":
            return f"    cell failed: {event.get('error', '')}"
        if kind == "control":
            # not indented: it is about the cell it names, not the one running now
            state = "applied" if event.get("applied") else f"ignored ({event.get('reason')})"
            cell = event.get("cell")
            return " ".join(p for p in ("control", str(event["cmd"]),
                                        self._cell_text(cell) if cell else "") if p) \
                + f": {state}"
        return None


def plain_requested(environ: dict[str, str] | None = None) -> bool:
    """``FUGUE_PLAIN`` set to anything but "" or "0" asks for the plain lines."""
    value = (os.environ if environ is None else environ).get("FUGUE_PLAIN", "")
    return value.strip() not in ("", "0")


def make_progress(total: int, console: Console, environ: dict[str, str] | None = None):
    """The progress renderer: the live view (:class:`fugue_tui.console.live.LiveProgress`) when
    ``console`` writes to a terminal, else (or with ``FUGUE_PLAIN``) :class:`PlainProgress`."""
    if plain_requested(environ) or not console.is_terminal or console.is_dumb_terminal:
        return PlainProgress(total)
    from fugue_tui.console.live import LiveProgress

    return LiveProgress(total, console)


def _parallel_text(cell) -> str:
    """``max 3``, ``max 3 auto`` (estimated from a profile), ``max 5 all`` ("auto" without
    a profile: every job); "" when nothing limits the cell."""
    if not cell.max_parallel:
        return ""
    how = {"profile": " auto", "profile-share": " auto", "all": " all"}.get(
        cell.max_parallel_method or "", "")
    return f"max {cell.max_parallel}{how}"


def dry_run(runner: Runner, console: Console, path: str, shown: str | None = None,
            as_json: bool = False) -> int:
    """Print the cells, their keys and what would be skipped; spend nothing.

    Why a cell would be skipped is a numbered note under the table (one per distinct
    reason), so the table keeps one line per cell. When the boxed table is wider than the
    console (an 80-column terminal), a compact one is printed instead: no vertical rules,
    two spaces between columns, cell keys shortened to their shortest unique prefix (at
    least 8 hex digits; control commands and resume accept it) when that is not enough,
    and long experiment ids, compile modes and variants folded inside their column."""
    planned = runner.plan()
    if as_json:  # the plan as a fugue-tui/plan document (docs/json.md)
        from fugue_tui.jsonout import document, dump, plan_cells, plan_devices

        several = len(runner.slots) > 1  # optional keys (docs/json.md): several devices
        dump(document("plan", campaign=runner.campaign_id, source=shown or path,
                      runs_dir=str(runner.runs_dir), device=runner.device,
                      **({"devices": plan_devices(runner.slots)} if several else {}),
                      cells=plan_cells(planned, runner.slot_of, len(runner.slots))))
        return 0
    variants = any(p.cell.scheduler or p.cell.rung or p.cell.max_parallel for p in planned)
    # The precision column only when some cell asks for one: plans without the axis print
    # as they always did.
    precisions = any(p.cell.precision for p in planned)
    # The device column only with several devices (issue 27): where each cell is placed.
    placed = len(runner.slots) > 1
    columns = ["#", "experiment", "executor"] + (["variant"] if variants else []) + [
        "compile"] + (["precision"] if precisions else []) + (["device"] if placed else []) + [
        "pass", "jobs", "cell key", "would"]
    notes: dict[str, list[int]] = {}
    rows = []
    for p in planned:
        c = p.cell
        variant = [" ".join(v for v in (c.scheduler, f"rung {c.rung}" if c.rung else "",
                                        _parallel_text(c))
                            if v)] if variants else []
        would = "run"
        if p.skip:
            notes.setdefault(p.skip, []).append(c.index)
            would = f"skip [{list(notes).index(p.skip) + 1}]"
        precision = ([c.precision or ("amp-fp16 (amp flag)" if any(j["amp"] for j in c.jobs)
                                     else "fp32")] if precisions else [])
        device = [_device_text(runner, c)] if placed else []
        rows.append([str(c.index), c.exp_id, c.executor, *variant, c.compile_mode, *precision,
                     *device, str(c.pass_index), str(len(c.jobs)), c.key, would])
    title = f"{len(planned)} cell{'' if len(planned) == 1 else 's'} of {shown or path}"
    table = _plan_table(title, columns, rows, compact=False)
    compact = False
    if _width(_plan_table(title, columns, _widest(rows), compact)) > console.width:
        table, compact = _plan_table(title, columns, rows, compact=True), True
    if _width(_plan_table(title, columns, _widest(rows), compact),
              "minimum") > console.width:  # too wide even folded: key prefixes
        short = _short_keys([row[-2] for row in rows])
        rows = [row[:-2] + [key, row[-1]] for row, key in zip(rows, short, strict=False)]
        table = _plan_table(title, columns, rows, compact=True)
    console.print(table)
    for i, (reason, cells) in enumerate(notes.items(), 1):
        which = f"cell {cells[0]}" if len(cells) == 1 else f"cells {_ranges(cells)}"
        console.print(Text(f"[{i}] skip {which}: {reason}"))
    return 0


def _device_text(runner: Runner, cell) -> str:
    """``2 cuda:1``: the device a cell is placed on (its number in ``devices``, as written)."""
    slot = runner.slot_of(cell)
    return f"{slot.index + 1} {slot.gpu.get('entry') or slot.uuid}" if slot else ""


#: Columns that stay on one line in the compact plan table (the rest fold).
_PLAN_NO_WRAP = {"#", "executor", "pass", "jobs", "cell key", "would"}
#: Shorter headers for the compact plan table.
_PLAN_SHORT = {"experiment": "exp", "cell key": "key"}


def _plan_table(title: str, columns: list[str], rows: list[list[str]], compact: bool) -> Table:
    if compact:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False, collapse_padding=True, padding=(0, 1))
    else:
        table = Table(title=title, title_justify="left")
    for column in columns:
        if compact:
            header = _PLAN_SHORT.get(column, column)
            table.add_column(header, overflow="fold", no_wrap=column in _PLAN_NO_WRAP,
                             min_width=None if column in _PLAN_NO_WRAP else len(header))
        else:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(value) for value in row))
    return table


def _short_keys(keys: list[str], least: int = 8) -> list[str]:
    """Each key cut to the shortest prefix (>= ``least`` characters) that no other key of
    the plan shares."""
    # In sorted order a key shares its longest prefix with a neighbour: O(n log n), where
    # comparing every pair took minutes on a plan of thousands of cells.
    order = sorted(set(keys))
    need = {}
    for i, key in enumerate(order):
        common = max((_common_prefix(key, order[j]) for j in (i - 1, i + 1)
                      if 0 <= j < len(order)), default=0)
        need[key] = key[:min(len(key), max(least, common + 1))]
    return [need[key] for key in keys]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _widest(rows: list[list[str]]) -> list[list[str]]:
    """The rows that decide a plan table's widths: per column, the one with the longest
    value and the one with the longest word (what a folded column cannot go below). Rich
    measures every cell of a table; on a plan of 10,000 cells that took seconds."""
    if not rows:
        return rows
    chosen: dict[int, list[str]] = {}
    for c in range(len(rows[0])):
        for size in (lambda v: cell_len(v),
                     lambda v: max((cell_len(w) for w in v.split()), default=0)):
            row = max(rows, key=lambda r: size(r[c]))
            chosen[id(row)] = row
    return list(chosen.values())


def _width(table: Table, which: str = "maximum") -> int:
    """The width ``table`` takes when nothing has to wrap (``maximum``), or folded as far as
    its columns allow (``minimum``)."""
    probe = Console(width=100_000, color_system=None)
    return getattr(Measurement.get(probe, probe.options, table), which)


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` → ``"1-3, 7, 9-10"``."""
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(out)


def run_batch(path: str, overrides: dict[str, Any], dry: bool = False, resume: bool = False,
              since: str | None = None, shown: str | None = None,
              reuse_any: bool = False, words=None, as_json: bool = False) -> int:
    """Run (or, with ``dry``, list) a campaign; ``resume`` skips cells with an ok row of this
    campaign (``reuse_any``: of any campaign). Exit status: the runner's — 0 every cell
    ok; 1 a cell failed, was killed or skipped; 2 bad input or a campaign already running;
    3 aborted through the control channel; 130 Ctrl-C or SIGTERM.

    ``as_json``: with ``dry`` the plan as JSON (:mod:`fugue_tui.jsonout`); else the run as
    JSON lines on stdout (:mod:`fugue_tui.console.batch_json`), the same exit status.

    ``words``: rewrites a warning about the campaign (``"<path>: <text>"``) in the words
    the user typed (``fugue-tui run`` generates the file: the warning names its flags, not
    a temporary path)."""
    from engine.plugins import load_plugins

    load_plugins()  # every name a campaign may use: built-ins and the user's plugins
    campaign = load_campaign(path, overrides)  # bad input stops here, before any process
    runner = Runner(campaign, resume=resume, since=since, reuse_any=reuse_any)
    console = Console()
    for warning in campaign.warnings:
        text = f"{path}: {warning}"
        print(f"fugue-tui: warning: {words(text) if words else text}", file=sys.stderr)
    # How max_parallel = "auto" was resolved, where it needs saying (no profile, another
    # machine's ignored): each distinct line once, not once per cell.
    for note in dict.fromkeys(n for cell in runner.cells for n in cell.notes):
        print(f"fugue-tui: warning: {note}", file=sys.stderr)
    if dry:  # the real run's checks of the runs folder, writing nothing: exit 2 as it would
        check_runs_path(runner.runs_dir)
        return dry_run(runner, console, path, shown, as_json=as_json)
    preflight(runner.runs_dir)  # an unwritable runs path is bad input: exit 2, nothing started
    follower = CampaignFollower(runner.run_dir, _size(runner.folder.runner_log))
    # the rows this run writes are those stamped from now on (the closing problem lines
    # name only them, never an earlier run's rows of the same campaign)
    started = time.strftime("%Y%m%d_%H%M%S")
    proc = _start_runner(path, overrides, resume, since, reuse_any, as_json)
    relay = _relay(proc.stderr)
    if as_json:  # JSON lines on stdout, nothing else there (fugue_tui.console.batch_json)
        from fugue_tui.console.batch_json import JsonProgress, write_summary

        progress = JsonProgress(runner.runs_dir, runner.campaign_id, started)
    else:
        progress = make_progress(len(runner.cells), console)
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
    if code == 2:  # bad input or busy: the runner said why on stderr, nothing ran
        return 2
    if not as_json:
        print_summary(console, runner.runs_dir / GROUPS_FILE, runner.campaign_id)
        _print_problems(runner, started)
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
                  quiet_stdout: bool = False) -> subprocess.Popen:
    argv = runner_argv(path, resume=resume, since=since, overrides=overrides,
                       reuse_any=reuse_any)
    env = engine_env()
    # Same process group: Ctrl-C reaches the runner too; it dies if this front end is killed.
    # Its stderr comes through a pipe (:func:`_relay`). ``quiet_stdout`` (--json): whatever
    # the runner or a cell prints goes to stderr, so stdout holds only the JSON lines.
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            stdout=sys.stderr.fileno() if quiet_stdout else None,
                            preexec_fn=die_with_parent(os.getpid()))


def _relay(stream) -> threading.Thread:
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


def _follow(proc: subprocess.Popen, follower: CampaignFollower, progress) -> None:
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


def _print_problems(runner: Runner, since: str) -> list[dict[str, Any]]:
    """One line on stderr per cell of this run (rows stamped at or after ``since``) whose
    last attempt was not ok: ``killed: D_ens seq pass 1 (attempt 1): <error>``. Rows of
    earlier runs of the same campaign are not this run's problems (an earlier ok row does
    not hide a cell this run killed, an earlier failure is not repeated)."""
    rows = [r for r in read_rows(runner.runs_dir / GROUPS_FILE)
            if r.get("campaign_id") == runner.campaign_id
            and (r.get("timestamp") or "") >= since]
    latest: dict[str, dict[str, str]] = {}
    for row in rows:
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


def print_summary(console: Console, groups_csv: Path, campaign_id: str) -> None:
    """The campaign's report (:func:`fugue_tui.report.tables.print_report`): per experiment ×
    executor, T_group, throughput, energy per model, speedup over seq with its interval or
    "n/a", baseline, accuracy parity, and the speedup chart. Never fails the batch run: a
    problem reading the results is printed as one line."""
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
