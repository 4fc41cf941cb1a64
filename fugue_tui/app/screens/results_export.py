"""The Results screen's export flow, off the screen: write the figures (PNG, SVG) and the
LaTeX table of the rows shown (:func:`fugue_tui.report.tables.export_results`) in a thread
worker, and when the folder already holds an earlier export ask before replacing it.

The outcome reaches the screen as a :class:`~fugue_tui.app.messages.Notice` (posted from
the worker thread: ``post_message`` is thread-safe), the question as a
:class:`~fugue_tui.app.screens.modals.ConfirmScreen` pushed on the UI thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.screen import Screen

from fugue_tui.app.messages import Notice
from fugue_tui.app.screens.modals import ConfirmScreen

if TYPE_CHECKING:
    from engine.results.load import Runs


def replace_question(folder: str, present: list[Path]) -> str:
    """The question asked when ``folder`` already holds ``present`` (names of 3 at most)."""
    listed = ", ".join(p.name for p in present[:3])
    more = f" and {len(present) - 3} more" if len(present) > 3 else ""
    return f"{folder} already holds {listed}{more} (an earlier export?). Replace them?"


class ResultsExport:
    """Runs the export of one screen's rows; the screen keeps the dialog and the action."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen

    def start(self, runs: Runs, folder: str, overwrite: bool = False) -> None:
        """Export ``runs`` to ``folder`` in a thread worker (group ``export``)."""
        self.screen.run_worker(lambda: self._write(runs, folder, overwrite),
                               thread=True, group="export")

    def _write(self, runs: Runs, folder: str, overwrite: bool) -> None:
        from engine.errors import FugueError
        from fugue_tui.report.export import ExportExists
        from fugue_tui.report.tables import export_results

        notes: list[str] = []  # a killed export's staging folder removed, say
        try:
            paths = export_results(runs, folder, overwrite=overwrite, notes=notes)
        except ExportExists as exc:
            # The command line's answer is "--overwrite"; here the user is asked instead.
            self.screen.app.call_from_thread(self.ask_overwrite, runs, folder, exc.present)
            return
        except (FugueError, OSError, ValueError) as exc:
            self.screen.post_message(Notice(f"export failed: {exc}", "error"))
            return
        for note in notes:
            self.screen.post_message(Notice(note, "warning"))
        self.screen.post_message(Notice(f"exported {len(paths)} files to {folder}"))

    def ask_overwrite(self, runs: Runs, folder: str, present: list[Path]) -> None:
        """Ask before replacing ``present``; a yes exports again with ``overwrite``."""
        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start(runs, folder, overwrite=True)

        self.screen.app.push_screen(
            ConfirmScreen(replace_question(folder, present), yes="Replace"), confirmed)
