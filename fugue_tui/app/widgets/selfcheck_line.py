"""The plan screen's self-check line: this machine's last ``fugue-tui selfcheck`` verdict
(:mod:`fugue_tui.app.models.selfcheck`), and the run that refreshes it in a thread worker
(the screen stays live while the check trains)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.widgets import Static

from fugue_tui.app.models import selfcheck as model


class SelfcheckLine(Static):
    """One line; :meth:`show` re-reads the verdicts of ``runs_dir``, :meth:`start` runs the
    check (one at a time) and shows the new verdict when it ends."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", id=kwargs.pop("id", "selfcheck-line"), **kwargs)
        self.running = False
        self._proc: Any = None  # the check's process while it runs

    def on_unmount(self) -> None:
        """The dashboard is quitting: end the check now (nothing is stored) rather than
        keep the terminal blank until it finishes (seen: 9 s after Ctrl-Q)."""
        from fugue_tui.app.process import stop_session

        if self._proc is not None:
            stop_session(self._proc)

    def show(self, runs_dir: str) -> None:
        line = model.last_line(runs_dir)
        self.update(Text(line, style="bold red" if "a defect" in line else "dim",
                         no_wrap=True, overflow="ellipsis", justify="right"))

    def start(self, runs_dir: str) -> bool:
        """Run the check unless one runs already; False when one does."""
        if self.running:
            return False
        self.running = True
        self.update(Text("self-check: running (under a minute) …", style="bold",
                         justify="right"))
        self._run(runs_dir)
        return True

    @work(thread=True, exclusive=True, group="selfcheck")
    def _run(self, runs_dir: str) -> None:
        outcome = model.run(runs_dir, started=self._started)
        self._proc = None
        self.app.call_from_thread(self._done, runs_dir, outcome)

    def _started(self, proc: Any) -> None:
        self._proc = proc

    def _done(self, runs_dir: str, outcome: model.Outcome) -> None:
        self.running = False
        self.show(runs_dir)
        self.notify(outcome.message, severity=outcome.severity,  # type: ignore[arg-type]
                    timeout=10, markup=False)
