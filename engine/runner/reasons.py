"""Why a cell's process ended, in the words of what was measured. Torch-free.

A row's ``error`` is read later by someone deciding whether to trust or rerun the cell, so it
says what is known and nothing that merely happened to be nearby: the cell's own one line
when it left one; for a process killed by a signal, the signal, Python's fatal-error line
when the fault handler wrote one (a segfault), and the monitor's last sample (memory is what
an outside SIGKILL, the kernel's OOM killer, is usually about) — never the last line of its
log, which for a cell killed from outside is whatever Ray or the monitor printed last. For
an exit status without a line of the cell's own, that last line is quoted as what it is.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from engine.event_types import MonitorSample

#: How much of the end of a cell's log is searched for Python's fatal-error report (bytes).
LOG_TAIL_BYTES = 64 * 1024

_FRAME = re.compile(r'^\s*File "[^"]*", line \d+ in \S+')


def exit_reason(code: int, said: str, log_path: Path,
                last_sample: MonitorSample | None = None, ended: float | None = None) -> str:
    """The error recorded for a cell that exited by itself with ``code`` (non-zero).

    ``said``: the cell's own one line (its ``failed`` event or reason file), which wins for
    an exit status; ``last_sample``: the monitor's last ``sample`` event; ``ended``: when
    the runner saw the process end (epoch seconds; now when None).
    """
    if code < 0:
        return signal_reason(-code, log_path, last_sample, ended)
    if said:
        return said
    line = last_line(log_path)  # a hint, labelled as such: it may not be the cause
    return f"cell exited with status {code}" + (f" (last line of its log: {line})"
                                                   if line else "")


def signal_reason(signum: int, log_path: Path, last_sample: MonitorSample | None = None,
                  ended: float | None = None) -> str:
    """``cell killed by signal 11 (SIGSEGV), not sent by the runner: Fatal Python error:
    Segmentation fault in File "x.py", line 3 in f; last monitor sample 0.4 s before: cell
    RSS 2048 MiB, host memory available 97 MiB`` (the parts that are known)."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "unknown signal"
    reason = f"cell killed by signal {signum} ({name}), not sent by the runner"
    fatal = fatal_error(log_path)
    if fatal:
        reason += f": {fatal}"
    memory = sample_facts(last_sample, ended)
    if memory:
        reason += f"; {memory}"
    return reason


def fatal_error(log_path: Path) -> str:
    """Python's fault-handler report at the end of the log, as one line: ``Fatal Python
    error: Segmentation fault in File "x.py", line 3 in f`` (the innermost frame of the
    thread that faulted); "" when the log has none."""
    lines = _tail(log_path).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error:")]
    if not starts:
        return ""
    found = lines[starts[-1]].strip()
    frame = next((ln.strip() for ln in lines[starts[-1] + 1:] if _FRAME.match(ln)), "")
    return f"{found} in {frame}" if frame else found


def sample_facts(sample: MonitorSample | None, ended: float | None = None) -> str:
    """``last monitor sample 0.4 s before: cell RSS 2048 MiB, host memory available 97
    MiB`` from a monitor ``sample`` event; "" without one (or without memory figures)."""
    if not sample:
        return ""
    facts = [f"{label} {value:.0f} MiB"
             for value, label in ((sample.rss_mib, "cell RSS"),
                                  (sample.host_mem_available_mib, "host memory available"))
             if isinstance(value, (int, float))]
    if not facts:
        return ""
    when = ""
    at = sample.time
    if isinstance(at, (int, float)):
        when = f" {max((ended or time.time()) - at, 0.0):.1f} s before"
    return f"last monitor sample{when}: {', '.join(facts)}"


def last_line(path: Path) -> str:
    """The log's last non-empty line (500 characters at most); "" when none."""
    lines = [ln.strip() for ln in _tail(path).splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - LOG_TAIL_BYTES, 0))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
