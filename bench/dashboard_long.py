"""Part ``dashboard_cost_long``: the dashboard's own CPU over a long campaign in a runs
folder that already holds many campaigns (issue 47, item 2: 9.8 % of a core over a 75-cell
campaign, climbing by thirds, because the speedup strip reloaded every campaign's rows at
each cell end).

``python -m bench.dashboard_cost --long [--reps N] [--cells C] [--earlier E] [--epochs P]`` (this
module does the work) runs, ``--reps`` times (default 2):

* a runs folder holding ``--earlier`` (default 300) group rows of earlier campaigns: the
  committed recording's rows (tests/fixtures/dashboard/runs) under other campaign ids,
  written with today's header (no upgrade on the first append);
* a campaign of ``--cells`` (default 60) real cells: experiment D_ens trained for
  ``--epochs`` (default 30: a cell ends about every 5 s on a quiet 2-core host, the pace of
  the issue's campaign, 75 cells in 6 min 19 s; the catalogue's 15 ends one every ~3 s),
  ``seq`` and ``unified_model`` alternating over ``cells / 2`` passes, one torch thread,
  the monitor at 0.5 s, CPU — every cell end changes the speedup so far;
* ``fugue-tui dashboard --attach`` in a pseudo-terminal of 150×48 (as ``dashboard_cost``).

Figures, per repetition:

* ``dashboard_cpu_share`` (fraction of one core), variants ``all``, ``first third``,
  ``last third``: the dashboard's CPU seconds ÷ wall seconds from its first screen until
  the runner exited, and over the first and last third of that window. Target ≤ 0.05;
* ``cpu_share_drift`` (percentage points): last third − first third. Target ≤ 1 (flat);
* ``strip_latency_max_s``: the longest time, over the cell ends that change the strip,
  from the cell's group row landing in the file (the bench polls it every 0.1 s) until the
  strip's new text (label, speedup and interval, computed by the bench with the same
  analysis) arrives on the terminal — or a later cell end's text, when the next cell ended
  first (the dashboard shows the newest). Target ≤ 5;
* ``clock_gap_max_s``: the longest time between two successive values of the header's
  elapsed clock arriving on the terminal (it ticks every second). Target ≤ 1.5;
* ``strip_latency_s``: every such latency (no target); ``load_1min`` after each repetition.

``--view processes`` (issue 48: "the long-campaign figure still met with the process view
open"), published as part ``dashboard_cost_long_processes`` (its own section of RESULTS.md,
so that the run screen's figures above stay shown beside it), variants named
``processes: …``: the same campaign, but once the run screen is up the bench presses ``P``
and the process view (:mod:`fugue_tui.app.screens.processes`: psutil over the campaign's
process tree and NVML every second, its table updated cell by cell) stays open until the
runner exits. Only the CPU figures are measured then — ``dashboard_cpu_share`` (all, first
and last third, from the moment the view is on the terminal) and ``cpu_share_drift`` —
because the view covers the run screen: Textual paints only the screen on top, so neither
the strip nor the header's clock reaches the terminal while it is open. Alternating the two
screens was not chosen: each switch repaints a whole screen (a cost of the switching, not
of either screen), and the run screen's figures are measured without the view already.
The view's rows are checked to keep arriving (its title, which counts the processes,
reaches the terminal in the last third of the campaign), or the repetition fails.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

PART = "dashboard_cost_long"
#: ``--view``: the screen open during the campaign → the part its figures are published as.
VIEWS = {"run": PART, "processes": "dashboard_cost_long_processes"}
#: Bytes that show the process view is on the terminal (its title, rewritten as the count
#: of processes changes).
PROCS_MARK = b"sorted by CPU %"
FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "dashboard" / "runs"
#: The header's elapsed clock: `` · cpu · elapsed 1:23 · cells`` (bytes, as the terminal
#: gets them; the word is left out where it would wrap the line).
CLOCK = re.compile(rb" \xc2\xb7 cpu \xc2\xb7 (?:elapsed )?(\d+:\d\d(?::\d\d)?) \xc2\xb7 cells")


def figures(cells: int = 60, earlier: int = 300, epochs: int = 30):
    from bench.results import Figure

    return {
        "share": Figure("dashboard_cpu_share", "fraction of one core", target="<=0.05",
                        note=f"dashboard CPU s / wall s over a campaign of {cells} cells (D_ens "
                             f"at {epochs} epochs, seq and unified_model alternating) in a runs "
                             f"folder holding {earlier} earlier group rows; all: first screen "
                             "to runner exit; first/last third of that window"),
        "drift": Figure("cpu_share_drift", "percentage points", target="<=1",
                        note="last third's CPU share minus the first third's (flat: <= 1)"),
        "latency_max": Figure("strip_latency_max_s", "s", target="<=5",
                              note="longest time from a cell's group row landing to the "
                                   "strip's new text on the terminal, over the cell ends "
                                   "that change the strip"),
        "clock": Figure("clock_gap_max_s", "s", target="<=1.5",
                        note="longest time between two successive values of the header's "
                             "elapsed clock on the terminal (ticks every second)"),
        "latency": Figure("strip_latency_s", "s",
                          note="each cell end's strip latency (as strip_latency_max_s)"),
        "load": Figure("load_1min", "load", note="1-minute load average after each repetition"),
    }


class Recorder:
    """A :class:`bench.dashboard_cost.Terminal` whose reads are timed: ``log`` holds
    ``(monotonic time, buffer length)`` after each read, to date any byte position."""

    def __init__(self, term) -> None:
        self.term = term
        self.log: list[tuple[float, int]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        seen = 0
        with self.term.cond:
            while not self._stop:
                if len(self.term.buffer) != seen:
                    seen = len(self.term.buffer)
                    self.log.append((time.monotonic(), seen))
                self.term.cond.wait(0.5)

    def stop(self) -> None:
        self._stop = True
        with self.term.cond:
            self.term.cond.notify_all()
        self._thread.join(2)

    def time_at(self, position: int) -> float:
        """When byte ``position`` had arrived (the first read that reached past it)."""
        for when, length in self.log:
            if length > position:
                return when
        return self.log[-1][0] if self.log else float("nan")


def earlier_rows(path: Path, count: int) -> None:
    """``path`` (a new ``master_groups.csv``) with ``count`` group rows of earlier
    campaigns: the recording's rows, 12 campaigns' worth repeated under new ids."""
    from engine.results.columns import GROUPS_FILE, header

    with (FIXTURE / GROUPS_FILE).open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns = list(header(GROUPS_FILE))
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, restval="", extrasaction="ignore",
                            lineterminator="\r\n")
    writer.writeheader()
    for i in range(count):
        row = rows[i % len(rows)]
        writer.writerow({**row, "campaign_id": f"earlier{i // len(rows)}-{row['campaign_id']}",
                         "group_id": f"{row['group_id']}-{i}"})
    path.write_text(out.getvalue())


def _campaign(tmp: Path, name: str, cells: int, epochs: int) -> Path:
    mine = tmp / "epochs.toml"
    mine.write_text(f"[experiments.D_ens]\nepochs = {epochs}\n")
    path = tmp / f"{name}.toml"
    path.write_text(f'name = "{name}"\nexperiments = "D_ens"\nexecutors = ["seq", '
                    f'"unified_model"]\npasses = {cells // 2}\nseed = 42\n'
                    f'runs_dir = "{tmp / "runs"}"\nexperiments_file = "{mine}"\n'
                    'device = "cpu"\nthreads = 1\nmonitor_interval_s = 0.5\n')
    return path


def run_long(tmp: Path, name: str, cells: int, earlier: int, epochs: int = 30,
             view: str = "run") -> dict:
    """One long campaign watched by a dashboard; the figures of one repetition. ``view``:
    ``run`` (the run screen throughout) or ``processes`` (the process view opened once the
    run screen is up and kept open: CPU figures only, see the module docstring).

    Raises:
        RuntimeError: the runner failed, the dashboard did not show its screen in 60 s, or
            the process view stopped reaching the terminal.
    """
    from bench.dashboard_cost import READY_MARK, Terminal, _env, raise_if_failed, stop
    from engine.results.columns import GROUPS_FILE
    from engine.results.tail import GroupTail
    from fugue_tui.app.models.so_far import SoFar

    runs = tmp / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    earlier_rows(runs / GROUPS_FILE, earlier)
    env = _env()
    run_dir = runs / name
    runner = subprocess.Popen([sys.executable, "-m", "engine.runner",
                               str(_campaign(tmp, name, cells, epochs))], cwd=tmp, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    term = recorder = None
    ends: list[tuple[float, int, int]] = []  # (time, buffer mark, needle index)
    needles: list[bytes] = []
    samples: list[tuple[float, float]] = []  # (monotonic, CPU seconds)
    try:
        deadline = time.monotonic() + 60
        while not (run_dir / "runner.jsonl").is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
        term = Terminal([sys.executable, "-m", "fugue_tui", "dashboard", "--attach",
                         str(run_dir)], tmp, env)
        recorder = Recorder(term)
        if term.wait_for(READY_MARK, 0, 60) is None:
            raise RuntimeError("the dashboard did not show the run screen in 60 s")
        time.sleep(0.5)  # the first full paint
        if view == "processes":
            opened = term.mark()
            term.send(b"P")
            if term.wait_for(PROCS_MARK, opened, 30) is None:
                raise RuntimeError("the dashboard did not show the process view in 30 s")
            time.sleep(1.5)  # its first samples
        proc = psutil.Process(term.pid)
        tail = GroupTail(runs / GROUPS_FILE, name)
        tail.update()
        so_far = SoFar(runs, name)
        so_far.parts()
        next_sample = time.monotonic()
        while runner.poll() is None:
            now = time.monotonic()
            if now >= next_sample:
                samples.append((now, sum(proc.cpu_times()[:2])))
                next_sample += 1.0
            if tail.update():  # a cell's group row landed: the strip must follow
                mark = term.mark()
                parts = so_far.parts()
                text = " ".join(parts[0]).encode() if parts else b""
                if text and (not needles or text != needles[-1]):
                    needles.append(text)
                    ends.append((now, mark, len(needles) - 1))
            time.sleep(0.1)
        samples.append((time.monotonic(), sum(proc.cpu_times()[:2])))
        if view == "run":
            time.sleep(5.5)  # the last cell end's strip
    finally:
        stop(runner, recorder, term)
    raise_if_failed(runner)
    buffer = bytes(term.buffer)
    if view == "processes":
        last = buffer.rfind(PROCS_MARK)
        t0, t1 = samples[0][0], samples[-1][0]
        if last < 0 or recorder.time_at(last) < t0 + 2 * (t1 - t0) / 3:
            raise RuntimeError("the process view's rows stopped reaching the terminal "
                               "before the last third of the campaign")
        return {"shares": _thirds(samples), "latencies": [], "clock_gap": float("nan"),
                "cells": cells}
    latencies = []
    for when, mark, first in ends:
        found = [p for p in (buffer.find(n, mark) for n in needles[first:]) if p >= 0]
        latencies.append(recorder.time_at(min(found) + 1) - when if found else float("inf"))
    clocks = [(recorder.time_at(m.end()), m.group(1)) for m in CLOCK.finditer(buffer)]
    changes = [t for i, (t, v) in enumerate(clocks) if i == 0 or v != clocks[i - 1][1]]
    gaps = [b - a for a, b in zip(changes, changes[1:], strict=False)]
    return {"shares": _thirds(samples), "latencies": latencies,
            "clock_gap": max(gaps) if gaps else float("inf"), "cells": cells}


def _thirds(samples: list[tuple[float, float]]) -> dict[str, float]:
    """CPU share over the whole window and its first and last thirds (by wall time)."""
    (t0, c0), (t1, c1) = samples[0], samples[-1]

    def at(t: float) -> tuple[float, float]:
        return min(samples, key=lambda s: abs(s[0] - t))

    a, b = at(t0 + (t1 - t0) / 3), at(t0 + 2 * (t1 - t0) / 3)
    return {"all": (c1 - c0) / (t1 - t0), "first third": (a[1] - c0) / (a[0] - t0),
            "last third": (c1 - b[1]) / (t1 - b[0])}


def main_long(args) -> int:
    """``--long``: the repetitions, printed and (without ``--no-write``) published."""
    import tempfile

    from bench import results as bench_results

    view = getattr(args, "view", "run")
    command = (f"python -m bench.dashboard_cost --long --reps {args.reps} --cells {args.cells} "
               f"--earlier {args.earlier} --epochs {args.epochs}"
               + (f" --view {view}" if view != "run" else ""))
    share: dict[str, list[float]] = {"all": [], "first third": [], "last third": []}
    drift, worst, clock, every, loads = [], [], [], [], []
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory(prefix="bench-dashboard-long-") as tmp_name:
            out = run_long(Path(tmp_name), f"long{rep + 1}", args.cells, args.earlier,
                           args.epochs, view)
        for key, value in out["shares"].items():
            share[key].append(value)
        drift.append(100 * (out["shares"]["last third"] - out["shares"]["first third"]))
        worst.append(max(out["latencies"], default=float("nan")))
        every += out["latencies"]
        clock.append(out["clock_gap"])
        loads.append(os.getloadavg()[0])
        seen = (f"strip latency max {worst[-1]:.2f} s over {len(out['latencies'])} cell "
                f"ends; clock gap max {clock[-1]:.2f} s" if view == "run"
                else "the process view open throughout")
        print(f"rep {rep + 1}/{args.reps}: {args.cells} cells, dashboard "
              f"{share['all'][-1]:.2%} of a core (first third {share['first third'][-1]:.2%}, "
              f"last {share['last third'][-1]:.2%}, drift {drift[-1]:+.2f} pp); {seen}; "
              f"load {loads[-1]:.2f}", flush=True)
    if args.no_write:
        return 0
    fig = figures(args.cells, args.earlier, args.epochs)
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    if view != "run":
        part = VIEWS[view]
        named = {f"{view}: {key}": values for key, values in share.items()}
        rows = (bench_results.figure_rows(part, _with_view(fig["share"], view), named,
                                          run_id, prov)
                + bench_results.figure_rows(part, fig["drift"], {view: drift}, run_id, prov)
                + bench_results.figure_rows(part, fig["load"], {"machine": loads}, run_id,
                                            prov))
        bench_results.publish(part, rows, args.results_dir)
        return 0
    rows = (bench_results.figure_rows(PART, fig["share"], share, run_id, prov)
            + bench_results.figure_rows(PART, fig["drift"], {"long": drift}, run_id, prov)
            + bench_results.figure_rows(PART, fig["latency_max"], {"long": worst}, run_id, prov)
            + bench_results.figure_rows(PART, fig["clock"], {"long": clock}, run_id, prov)
            + bench_results.figure_rows(PART, fig["latency"], {"long": every}, run_id, prov)
            + bench_results.figure_rows(PART, fig["load"], {"machine": loads}, run_id, prov))
    bench_results.publish(PART, rows, args.results_dir)
    return 0


def _with_view(figure, view: str):
    """``figure`` with its note saying which screen was open (``--view``)."""
    import dataclasses

    return dataclasses.replace(figure, note=f"{figure.note}; the {view} view open from the "
                                            "first screen to the runner's exit (P on the run "
                                            "screen), measured from the view's first paint")
