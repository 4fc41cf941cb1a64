"""The runner's zygote while a campaign runs (:mod:`engine.runner.zygote`): started once
before the first cell, handed to each attempt (which forks its cell from it), said lost
once when it stops serving, stopped with the campaign. Torch-free.

Attempts receive a :class:`WarmStart`, never the runner: it is their handle on the zygote.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.event_types import RunnerWarning, RunnerZygote
from engine.runner.cellproc import scratch_prefix
from engine.runner.journal import Journal
from engine.runner.zygote import Zygote, ZygoteError


class WarmStart:
    """The campaign's zygote (None until :meth:`start`, and again once it failed).

    ``run_dir``: the run folder (its ``zygote.log``); ``env(scratch)``: the cells'
    environment with compile caches in ``scratch`` (the zygote gets it, with a scratch
    folder of its own that it never uses); events go to ``journal``.
    """

    def __init__(self, journal: Journal, run_dir: Path, env: Callable[[Path], dict[str, str]]):
        self.journal, self.run_dir, self.env = journal, run_dir, env
        #: The zygote while it serves (None: not started, or cells start the old way).
        self.zygote: Zygote | None = None
        #: One request at a time on the zygote's socket (concurrent attempts start cells).
        self.lock = threading.Lock()
        self._scratch: Path | None = None

    def start(self) -> None:
        """Start the zygote and wait for its imports, before the first cell (so no cell's
        time holds them). A zygote that cannot start is said once (a ``zygote`` event with
        the error, and a warning) and the cells start the old way."""
        t0 = time.perf_counter()
        try:
            try:
                self._scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix()))
            except OSError as exc:
                raise ZygoteError(f"no scratch folder for the zygote: {exc}") from None
            zygote = Zygote.start(self.run_dir, self.env(self._scratch))
            self.zygote = zygote
            zygote.wait_ready()
        except ZygoteError as exc:
            self._lost(self.zygote.pid if self.zygote else None, str(exc))
            return
        facts = zygote.facts
        self.journal.emit(RunnerZygote(
            pid=zygote.pid, warm_s=round(time.perf_counter() - t0, 3),
            imports_s=_said(facts, "imports_s"), threads=_said(facts, "threads"),
            python_threads=_said(facts, "python_threads"),
            cuda_initialized=_said(facts, "cuda_initialized")))

    def failed(self, zygote: Zygote) -> None:
        """``zygote`` stopped serving while a cell started (that cell and the rest start
        the old way): said once, in a ``zygote`` event naming why."""
        if self.zygote is zygote:
            self._lost(zygote.pid, zygote.broken)

    def _lost(self, pid: int | None, why: str) -> None:
        """No zygote from now on: the event, and the warning every front end shows."""
        self.zygote = None
        self.journal.emit(RunnerZygote(pid=pid, error=why))
        self.journal.emit(RunnerWarning(
            message=f"cells start as fresh interpreters from now on: {why}"))

    def stop(self) -> None:
        """Stop the zygote (if it runs) and remove its scratch folder."""
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def _said(facts: Mapping[str, Any], key: str) -> Any:
    """One fact of the zygote's ``ready`` message (JSON from its process: untyped; None
    where it did not say, as the event has always had it)."""
    return facts.get(key)
