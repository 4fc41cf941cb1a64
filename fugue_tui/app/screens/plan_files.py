"""The Plan screen's file flow, off the screen: save the plan as a campaign TOML file
(asking before creating a missing folder) and load one, each in a thread worker (group
``file``, exclusive). A load answers with a :class:`~fugue_tui.app.messages.PlanLoaded`
message the screen applies; a save records the saved path and document on the screen.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import FugueError
from fugue_tui.app.messages import PlanLoaded
from fugue_tui.app.models.plan import load_plan, save_plan
from fugue_tui.app.screens.modals import ConfirmScreen

if TYPE_CHECKING:
    from fugue_tui.app.models.plan import PlanDoc
    from fugue_tui.app.screens.plan import PlanScreen


class PlanFiles:
    """Saves and loads one :class:`~fugue_tui.app.screens.plan.PlanScreen`'s plan."""

    def __init__(self, screen: PlanScreen) -> None:
        self.screen = screen

    def save_to(self, path: str | None) -> None:
        """Save to ``path``; a folder that does not exist is created only once the user
        said so (a save used to create ``campaigns/`` under any working directory)."""
        if not path:
            return
        folder = Path(path).expanduser().parent
        doc = copy.deepcopy(self.screen.doc)
        if not folder.is_dir():
            def confirmed(yes: bool | None) -> None:
                if yes:
                    self._save(doc, path)
                else:
                    self.screen.notify("not saved", markup=False)

            self.screen.app.push_screen(
                ConfirmScreen(f"The folder {folder} does not exist. Create it and save "
                              f"{Path(path).name} there?", yes="Create"), confirmed)
            return
        self._save(doc, path)

    def _save(self, doc: PlanDoc, path: str) -> None:
        self.screen.run_worker(lambda: self._save_thread(doc, path), thread=True,
                               exclusive=True, group="file")

    def _save_thread(self, doc: PlanDoc, path: str) -> None:
        try:
            written = save_plan(doc, path)
        except FugueError as exc:
            self.screen.app.call_from_thread(self.screen.notify, str(exc), severity="error",
                                             timeout=10, markup=False)
            return
        self.screen.app.call_from_thread(self._saved, written, doc)

    def _saved(self, path: Path, doc: PlanDoc) -> None:
        self.screen.source_path, self.screen.source_doc = path, doc
        self.screen.notify(f"saved {path}", markup=False)

    def load(self, path: str | None) -> None:
        """Load ``path`` in a worker; the screen gets a :class:`PlanLoaded` either way."""
        if path:
            self.screen.run_worker(lambda: self._load_thread(path), thread=True,
                                   exclusive=True, group="file")

    def _load_thread(self, path: str) -> None:
        try:
            self.screen.post_message(PlanLoaded(path, load_plan(path)))
        except FugueError as exc:
            self.screen.post_message(PlanLoaded(path, None, str(exc)))
