"""The run screen's header: the campaign line (:func:`fugue_tui.app.models.run_text.campaign_header`),
one line per device when cells run on several at once
(:func:`fugue_tui.app.models.run.devices_line`), and the "speedup so far" strip with the
campaign's ETA (:mod:`fugue_tui.app.models.so_far`, :mod:`fugue_tui.app.models.eta`).

The speedups are computed from the rows the campaign has written, in a thread worker, only
when a cell finished since the last computation (rows land as cells finish), and only when
a speedup can exist (:func:`~fugue_tui.app.models.so_far.comparable`). Incrementally: one
:class:`~fugue_tui.app.models.so_far.SoFar` per campaign reads only the group rows appended
since its last call (the runs folder's other campaigns once), at most one analysis per
:data:`~fugue_tui.app.models.so_far.STRIP_WINDOW_S` (cell ends closer together are folded into
the next one, :class:`~fugue_tui.app.models.so_far.Coalesce`), and a newer analysis cancels a
worker still waiting (it never posts a stale answer). The result lands in :attr:`RunHeader.so_far`, a
reactive variable: the screen watches it to redraw at once when it changed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from textual import work
from textual.reactive import var
from textual.widgets import Static
from textual.worker import get_current_worker

from fugue_tui.app.models.run import RunModel, devices_line
from fugue_tui.app.models.run_text import HEADER_LEVELS, campaign_header

#: Lines of the header without the devices (the stylesheet's cap), and devices shown at most.
HEADER_LINES = 3
MAX_DEVICES = 8


class RunHeader(Static):
    """The campaign header (see the module); :meth:`show` redraws it."""

    #: The speedups so far, ``(label, "1.20×", interval)`` each
    #: (:func:`fugue_tui.app.models.so_far.speedup_parts`); set by the worker.
    so_far: var[list[tuple[str, str, str]]] = var(list, init=False)
    #: What they are: ``speedup so far: `` or, for a stream campaign, ``p95 job completion
    #: so far: `` (:attr:`fugue_tui.app.models.so_far.SoFar.head`).
    so_far_head: str = "speedup so far: "

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        #: The finished-cell count the speedups were last asked for.
        self._so_far_done = -1
        self._shown: str | None = None
        #: ``((runs_dir, campaign), SoFar)``: the incremental speedups of the campaign shown.
        self._so_far_model: tuple[tuple[Path, str], Any] | None = None
        self._so_far_lock = threading.Lock()
        from fugue_tui.app.models.so_far import Coalesce

        #: One analysis per window; the folder and campaign the next one is for.
        self._so_far_gate = Coalesce()
        self._so_far_args: tuple[Path, str] | None = None
        #: Analyses started (tests read it).
        self.so_far_runs = 0
        #: :meth:`show`'s arguments, to fit the lines again at a new width.
        self._last: tuple[RunModel, float, Path, dict[str, Any]] | None = None
        self._width = 0

    def on_resize(self) -> None:
        """Fit the lines to the new width at once: fitted to the old one, a strip wider
        than the screen wrapped and was cut mid-item until the next redraw (issue 47,
        item 5); a narrower one wasted the room."""
        if self._last is not None:
            model, now, run_dir, keywords = self._last
            self.show(model, now, run_dir, **keywords)

    def show(self, model: RunModel, now: float, run_dir: Path, *, replay: Any,
             attached: bool, handle: Any, stopping: bool) -> None:
        """Show the campaign of ``run_dir`` at the screen's clock ``now`` (Unix seconds):
        its line (:func:`~fugue_tui.app.models.run_text.campaign_header`: ``replay`` the
        :class:`~fugue_tui.app.models.replay.Replay` or None, ``attached`` to a runner
        started elsewhere, its ``handle``, ``stopping`` it), with the devices and the
        so-far strip under it. A layout pass only when the header's height may change."""
        from fugue_tui.app.models.eta import campaign_eta
        from fugue_tui.app.models.so_far import comparable, fit_strip

        self._last = (model, now, run_dir, {"replay": replay, "attached": attached,
                                            "handle": handle, "stopping": stopping})
        width = max(20, self.content_size.width or self.app.size.width - 2)
        # one line (issue 47, item 5: at 80 columns it wrapped onto two, hiding a cell
        # row): the first shortening that fits (campaign_header's levels, least needed
        # part first); at the last, what still does not fit ends in "…", never wraps
        for level in range(HEADER_LEVELS):
            text = campaign_header(model.view, run_dir, now, replay=replay,
                                   runner_alive=model.runner_alive, attached=attached,
                                   handle=handle, stopping=stopping, level=level)
            if cell_len(text.plain.split("\n", 1)[0]) <= width:
                break
        text.no_wrap, text.overflow = True, "ellipsis"
        state = model.view.state
        done = model.finished_count()
        if done != self._so_far_done and replay is None:  # a replay writes no rows
            self._so_far_done = done  # rows land as cells finish: recompute then only
            if comparable(state):  # else no speedup yet: spare the analysis' imports
                self._ask_so_far(run_dir.parent, state.campaign or run_dir.name)
        # one line of the header's width: a strip that wrapped was cut (issue 30, item 14)
        # the ETA counts down between cell ends (issue 47, item 8): it moves with ``now``
        eta = campaign_eta(state, now, model.view.total) if state.state == "running" else None
        strip = fit_strip(self.so_far, eta, width, self.so_far_head)
        devices = devices_line(model.running_cells())
        if devices:
            text.append(f"\n{devices}", style="green")
        if strip:
            text.append(f"\n{strip}", style="cyan")
        before = self._shown
        if text.plain != before:
            self._shown = text.plain
            lines = text.plain.count("\n")
            # Three lines, more with one line per device when cells run on several devices
            # at once (at most eight of them shown in full).
            self.styles.max_height = HEADER_LINES + min(MAX_DEVICES, devices.count("\n") + 1) \
                if devices else HEADER_LINES
            # a new width too: the height was laid out for the text of the old one
            self.update(text, layout=before is None or before.count("\n") != lines
                        or width != self._width)
            self._width = width

    def _ask_so_far(self, runs_dir: Path, campaign: str) -> None:
        """A cell ended: the analysis now, or at the window's end (folded into one already
        pending: it reads every row arrived by the time it runs)."""
        self._so_far_args = (runs_dir, campaign)
        wait = self._so_far_gate.ask()
        if wait is None:
            return
        if wait <= 0:
            self._start_so_far()
        else:
            self.set_timer(wait, self._start_so_far)

    def _start_so_far(self) -> None:
        self._so_far_gate.start()
        if self._so_far_args is not None:
            self.so_far_runs += 1
            self._speedup_so_far(*self._so_far_args)

    @work(thread=True, exclusive=True, group="so-far")
    def _speedup_so_far(self, runs_dir: Path, campaign: str) -> None:
        """Off the UI thread; a newer cell end's worker cancels this one (exclusive): it
        then skips the analysis if it has not begun and never posts a stale answer."""
        from fugue_tui.app.models.so_far import SoFar

        worker = get_current_worker()
        # One model per campaign, kept: each call reads only the rows appended since
        # (issue 47, item 2: it reloaded the whole runs folder at each cell end).
        with self._so_far_lock:  # a superseded worker may still be running: one at a time
            if self._so_far_model is None or self._so_far_model[0] != (runs_dir, campaign):
                self._so_far_model = ((runs_dir, campaign), SoFar(runs_dir, campaign))
            model = self._so_far_model[1]
            try:
                parts = model.parts(cancelled=lambda: worker.is_cancelled)
            except (OSError, ValueError, KeyError) as exc:  # a display aid must not stop us
                parts = [("speedup so far:", "not computed", f"({type(exc).__name__}: {exc})")]
        if not worker.is_cancelled:
            self.app.call_from_thread(self._set_so_far, parts, model.head)

    def _set_so_far(self, parts: list[tuple[str, str, str]], head: str) -> None:
        self.so_far_head = head
        self.so_far = parts
