"""Part ``dashboard_cost``: what watching a campaign with the dashboard costs.

``python -m bench.dashboard_cost [--reps N] [--probes M]`` runs real one-cell campaigns
(``python -m engine.runner``: experiment D_ens under ``seq``, one torch thread, the monitor
at its default 0.5 s, CPU) again and again, with and without a dashboard attached:

* ``with``: ``fugue-tui dashboard --attach RUN_DIR`` runs in a pseudo-terminal of 150×48
  (``TERM=xterm-256color``; a thread drains what it writes, as a terminal emulator would),
  started as soon as the runner created the run folder, showing the run screen with its
  device charts while the cell streams events;
* ``without``: the runner alone.

Figures:

* ``T_group`` (s) of the cell, ``with`` against ``without`` (baseline): what the
  dashboard costs the measurement. Per-repetition ratios; RESULTS.md says "not resolvable
  here" when their spread is larger than the difference;
* ``dashboard_cpu_share`` (fraction of one core): the dashboard process's CPU seconds
  (user + system, psutil) ÷ wall seconds, from its first full screen (its startup —
  interpreter, imports — excluded) until the runner exited. Target ≤ 0.05;
* ``dashboard_cpu_share`` variant ``replay``: the same, over ``--window`` seconds of the
  committed recording (tests/fixtures/dashboard/runs/speed, a real campaign) replayed at
  1x — the same code path as live events, without a cell competing for the CPU;
* ``keypress_latency_ms``: with a longer cell (D_cv, seq) streaming, ``--probes`` times:
  the time from writing ``?`` to the pseudo-terminal until the help screen's text
  ("binding id") arrives on it — key parsing, the action, the modal's composition,
  rendering and the terminal write included — then Escape closes it. Target ≤ 100 ms;
* ``load_1min``: the machine's load average after each repetition.

``--long``: the long-campaign variant (a campaign of 60 cells in a runs folder holding 300
earlier group rows), published as part ``dashboard_cost_long``: :mod:`bench.dashboard_long`.

Protocol (bench/README.md): one warm-up of each variant, then ``--reps`` (default 10)
repetitions with the variants' order alternating; each campaign is a fresh runner and
cell. The machine is shared: run it when ``uptime`` shows a load below 2, else say so
(the load is recorded with the rows).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil

PART = "dashboard_cost"
VARIANTS = ("without", "with")
SIZE = (150, 48)
#: Bytes that show the run screen is up (its cell table's header) and the help screen.
READY_MARK = b"T_group"
HELP_MARK = b"binding id"


def _figures():
    from bench.results import Figure

    return (
        Figure("T_group", "s", baseline="without",
               note="makespan of a real seq cell (D_ens, 1 thread, monitor 0.5 s) with and "
                    "without a dashboard attached to its campaign (run screen, charts "
                    "visible, 150x48 pseudo-terminal)"),
        Figure("dashboard_cpu_share", "fraction of one core", target="<=0.05",
               note="the dashboard process's CPU seconds / wall seconds from its first "
                    "screen until the campaign ended (startup excluded)"),
        Figure("keypress_latency_ms", "ms", target="<=100",
               note="'?' written to the pseudo-terminal until the help screen's text "
                    "arrives on it, while a D_cv seq cell streams"),
        Figure("load_1min", "load", note="1-minute load average after each repetition"),
    )


class Terminal:
    """A process in a pseudo-terminal; a thread reads what it writes."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the dashboard
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
        self.buffer = bytearray()
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.buffer += b"\0EOF"
                    self.cond.notify_all()
                    return
                self.buffer += data
                self.cond.notify_all()

    def mark(self) -> int:
        with self.lock:
            return len(self.buffer)

    def wait_for(self, needle: bytes, since: int, timeout: float) -> float | None:
        """Monotonic time when ``needle`` appeared after byte ``since``, or None."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if self.buffer.find(needle, since) >= 0:
                    return time.monotonic()
                left = deadline - time.monotonic()
                if left <= 0 or self.buffer.endswith(b"\0EOF"):
                    return None
                self.cond.wait(left)

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        try:
            os.close(self.fd)
        except OSError:
            pass


def _campaign(tmp: Path, name: str, experiment: str) -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(f'name = "{name}"\nexperiments = "{experiment}"\nexecutors = ["seq"]\n'
                    f'passes = 1\nseed = 42\nruns_dir = "{tmp / "runs"}"\ndevice = "cpu"\n'
                    'threads = 1\nmonitor_interval_s = 0.5\n')
    return path



def stop(runner: subprocess.Popen, *parts) -> None:
    """The end of a measured run, whatever happened: each of ``parts`` (a
    :class:`Terminal`, a recorder; None skipped) stopped, the runner killed if it still
    runs (nothing of the bench is left behind)."""
    for part in parts:
        if part is not None:
            part.stop()
    if runner.poll() is None:
        runner.kill()
        runner.wait()


def raise_if_failed(runner: subprocess.Popen) -> None:
    """RuntimeError with the runner's last stderr when it did not exit 0."""
    if runner.returncode != 0:
        raise RuntimeError(f"runner failed ({runner.returncode}): "
                           f"{runner.stderr.read().decode(errors='replace')[-2000:]}")


def _env() -> dict[str, str]:
    from engine.processes import engine_env

    env = {**engine_env(), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "TERM": "xterm-256color", "COLUMNS": str(SIZE[0]), "LINES": str(SIZE[1])}
    env.pop("NO_COLOR", None)
    return env


def run_campaign(tmp: Path, name: str, experiment: str, dashboard: bool,
                 probes: int = 0) -> dict:
    """One campaign of one cell; returns T_group, the dashboard's CPU share and latencies."""
    from engine.results.columns import GROUPS_FILE
    from engine.results.read import read_rows

    env = _env()
    run_dir = tmp / "runs" / name
    runner = subprocess.Popen([sys.executable, "-m", "engine.runner",
                               str(_campaign(tmp, name, experiment))], cwd=tmp, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    term = None
    share = None
    latencies: list[float] = []
    try:
        if dashboard:
            deadline = time.monotonic() + 60
            while not (run_dir / "runner.jsonl").is_file() and time.monotonic() < deadline:
                time.sleep(0.02)
            term = Terminal([sys.executable, "-m", "fugue_tui", "dashboard", "--attach",
                             str(run_dir)], tmp, env)
            if term.wait_for(READY_MARK, 0, 60) is None:
                raise RuntimeError("the dashboard did not show the run screen in 60 s")
            time.sleep(0.5)  # the first full paint
            proc = psutil.Process(term.pid)
            cpu0, wall0 = sum(proc.cpu_times()[:2]), time.monotonic()
            for _ in range(probes):
                time.sleep(1.5)
                if runner.poll() is not None:
                    break
                start_mark = term.mark()
                sent = time.monotonic()
                term.send(b"?")
                seen = term.wait_for(HELP_MARK, start_mark, 5)
                if seen is not None:
                    latencies.append((seen - sent) * 1000)
                time.sleep(0.3)
                term.send(b"\x1b")
            runner.wait(timeout=900)
            cpu1, wall1 = sum(proc.cpu_times()[:2]), time.monotonic()
            share = (cpu1 - cpu0) / (wall1 - wall0)
        else:
            runner.wait(timeout=900)
    finally:
        stop(runner, term)
    raise_if_failed(runner)
    rows = [r for r in read_rows(tmp / "runs" / GROUPS_FILE)
            if r["campaign_id"] == name and r["status"] == "ok"]
    if not rows:
        raise RuntimeError(f"campaign {name}: no ok group row")
    return {"T_group": float(rows[-1]["T_group"]), "share": share, "latencies": latencies}


def replay_share(tmp: Path, seconds: float) -> float:
    """The dashboard's CPU share while it replays the recorded campaign at 1x."""
    from tests.snapshots.helpers import install

    runs = tmp / "replay"
    if not runs.exists():
        runs.mkdir()
        install(runs)
    term = Terminal([sys.executable, "-m", "fugue_tui", "dashboard", "--replay",
                     str(runs / "runs" / "speed"), "--speed", "1"], tmp, _env())
    try:
        if term.wait_for(READY_MARK, 0, 60) is None:
            raise RuntimeError("the dashboard did not show the replay in 60 s")
        time.sleep(1.0)
        proc = psutil.Process(term.pid)
        cpu0, wall0 = sum(proc.cpu_times()[:2]), time.monotonic()
        time.sleep(seconds)
        cpu1, wall1 = sum(proc.cpu_times()[:2]), time.monotonic()
    finally:
        term.stop()
    return (cpu1 - cpu0) / (wall1 - wall0)


def main(argv: list[str] | None = None) -> int:
    from bench import prog

    parser = argparse.ArgumentParser(prog=prog(PART), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions (default 10; with --long 2)")
    parser.add_argument("--probes", type=int, default=20,
                        help="keypress latency probes (default 20)")
    parser.add_argument("--window", type=float, default=20.0,
                        help="seconds of replay per repetition (default 20)")
    parser.add_argument("--long", action="store_true",
                        help="the long-campaign variant instead (part dashboard_cost_long, "
                             "bench.dashboard_long)")
    parser.add_argument("--cells", type=int, default=60,
                        help="--long: cells of the campaign (default 60)")
    parser.add_argument("--earlier", type=int, default=300,
                        help="--long: earlier group rows in the runs folder (default 300)")
    parser.add_argument("--epochs", type=int, default=30,
                        help="--long: D_ens's epochs per cell (default 30: a cell every ~5 s)")
    parser.add_argument("--view", choices=("run", "processes"), default="run",
                        help="--long: the screen open during the campaign: the run screen "
                             "(default; part dashboard_cost_long) or the process view, opened "
                             "with P after the first screen and kept open (CPU figures only; "
                             "part dashboard_cost_long_processes)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.view != "run" and not args.long:
        parser.error("--view goes with --long (the one-cell campaigns watch the run screen)")
    if args.long:
        from bench.dashboard_long import main_long

        args.reps = 2 if args.reps is None else args.reps
        if args.reps < 1 or args.cells < 4 or args.earlier < 0 or args.epochs < 1:
            parser.error("--long needs --reps >= 1, --cells >= 4, --earlier >= 0 and "
                         "--epochs >= 1")
        return main_long(args)
    args.reps = 10 if args.reps is None else args.reps
    if args.reps < 1 or args.probes < 1:
        parser.error("--reps and --probes must be >= 1")
    if args.reps < 10:
        print(f"warning: {args.reps} repetitions (the protocol asks for >= 10 for A/B "
              "overhead figures)", file=sys.stderr)
    load = os.getloadavg()[0]
    if load >= 2:
        print(f"warning: load average {load:.2f} (>= 2): others are using this machine; "
              "the figures are recorded with the load", file=sys.stderr)
    from bench import results as bench_results

    command = (f"python -m bench.{PART} --reps {args.reps} --probes {args.probes} "
               f"--window {args.window:g}")
    t_group: dict[str, list[float]] = {v: [] for v in VARIANTS}
    shares: list[float] = []
    replay_shares: list[float] = []
    latencies: list[float] = []
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp_name:
        tmp = Path(tmp_name)
        n = 0
        for variant in VARIANTS:  # warm-up: page cache, first-call costs
            n += 1
            run_campaign(tmp, f"warm{n}", "D_ens", variant == "with")
        for rep in range(args.reps):
            order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                n += 1
                out = run_campaign(tmp, f"c{n}", "D_ens", variant == "with")
                t_group[variant].append(out["T_group"])
                if out["share"] is not None:
                    shares.append(out["share"])
            replay_shares.append(replay_share(tmp, args.window))
            loads.append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{args.reps}: without {t_group['without'][-1]:.3f} s, with "
                  f"{t_group['with'][-1]:.3f} s, dashboard {shares[-1]:.2%} of a core "
                  f"(replay {replay_shares[-1]:.2%}); load {loads[-1]:.2f}", flush=True)
        out = run_campaign(tmp, "latency", "D_cv", True, probes=args.probes)
        latencies = out["latencies"]
        print(f"keypress latency over {len(latencies)} probes: "
              + ", ".join(f"{v:.0f}" for v in latencies) + " ms", flush=True)
    fig_t, fig_share, fig_lat, fig_load = _figures()
    run_id = bench_results.new_run_id()
    prov = bench_results.provenance(command)
    rows = (bench_results.figure_rows(PART, fig_t, t_group, run_id, prov)
            + bench_results.figure_rows(PART, fig_share, {"with": shares,
                                                          "replay": replay_shares}, run_id, prov)
            + bench_results.figure_rows(PART, fig_lat, {"help": latencies}, run_id, prov)
            + bench_results.figure_rows(PART, fig_load, {"machine": loads}, run_id, prov))
    if args.no_write:
        return 0
    bench_results.publish(PART, rows, args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
