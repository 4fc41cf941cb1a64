"""The run screen's commands on the selected cell (its actions ``r``, ``s``, ``x``, ``d``):
retry, skip and kill go to the runner through its control channel
(:func:`engine.runner.control.send`) once the user said yes; the stack dump asks a running
cell's processes for their stacks (:func:`fugue_tui.app.models.stack_report.cell_report`)
and shows them. The sending and the dump run in thread workers of the screen; what comes of
them reaches it as :class:`~fugue_tui.app.messages.Notice` messages or a pushed screen.
When each command applies is the model's rule
(:func:`fugue_tui.app.models.run.command_applies`); :meth:`CellCommands.available` says it
for each of the screen's actions that depends on the cell or the runner."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from fugue_tui.app.messages import Notice
from fugue_tui.app.models.run import command_applies, stacks_available, why_no_stacks
from fugue_tui.app.models.run_text import confirm_question
from fugue_tui.app.screens.modals import ConfirmScreen

if TYPE_CHECKING:
    from fugue_tui.app.screens.run import RunScreen


class CellCommands:
    """The commands of one run screen (see the module)."""

    def __init__(self, screen: RunScreen) -> None:
        self.screen = screen

    def available(self, action: str) -> bool:
        """Whether the screen's ``action`` applies now (the footer offers it, its key does
        something): a command for the selected cell, leaving the screen, the replay's keys.
        Any other action always applies."""
        screen = self.screen
        if action in ("retry_cell", "skip_cell", "kill_cell"):
            cell = screen.selected_cell()
            return cell is not None and command_applies(
                action.removesuffix("_cell"), cell, screen.runner_alive, screen.stopping)
        if action == "back_to_plan":
            return not screen.runner_alive
        if action == "back":  # a live campaign is left with q (stop or detach)
            return (screen.replay is not None or not screen.runner_alive) and \
                len(screen.app.screen_stack) > 2
        if action == "dump_stacks":  # a live cell of a live runner: something to ask
            cell = screen.selected_cell()
            return screen.replay is None and cell is not None and stacks_available(cell)
        if action == "stop_campaign":  # a live runner of ours or attached, not yet stopping
            return screen.replay is None and screen.handle is not None and \
                bool(screen.runner_alive) and not screen.stopping
        if action == "why_no_stacks":  # d where the dump does not apply: it says why
            return not self.available("dump_stacks")
        if action in ("toggle_pause", "step", "faster", "slower", "to_end", "seek", "seek_to"):
            return screen.replay is not None
        return True

    def confirm(self, command: str) -> None:
        """Ask before ``command`` (retry, skip, kill) goes for the selected cell; nothing
        when it does not apply (no cell, the runner gone, stopping)."""
        screen = self.screen
        cell = screen.selected_cell()
        if cell is None or not screen.check_action(f"{command}_cell", ()):
            return
        key = cell.key

        def answer(yes: bool | None) -> None:
            if yes:
                screen.run_worker(partial(self._send, command, key), thread=True,
                                  group="control")
        screen.app.push_screen(ConfirmScreen(confirm_question(command, cell), yes=command),
                               answer)

    def confirm_stop(self) -> None:
        """Ask, then stop the campaign the way quit's "stop" does
        (:meth:`RunScreen.begin_stop`), keeping the screen: it shows how the campaign
        ended. Nothing when there is no live runner to stop or it is stopping already."""
        screen = self.screen
        if not screen.check_action("stop_campaign", ()):
            return
        name = screen.view.state.campaign or screen.run_dir.name

        def stopped(forced: list[int]) -> None:
            extra = f" (SIGKILL needed for pids {forced})" if forced else ""
            screen.notify(f"stopped campaign {name}: no runner or cell process is "
                          f"left{extra}", markup=False)

        def answer(yes: bool | None) -> None:
            if yes and screen.check_action("stop_campaign", ()):
                screen.begin_stop(stopped)
        screen.app.push_screen(ConfirmScreen(
            f"Stop campaign '{name}'? The running cell is killed and recorded as killed; "
            "no process survives. This screen stays.", yes="Stop"), answer)

    def _send(self, command: str, cell_key: str) -> None:
        """(thread worker) Send it; a notice says it went or why not."""
        from engine.errors import FugueError
        from engine.runner.control import send

        try:
            send(self.screen.run_dir, command, cell_key)
        except FugueError as exc:
            self.screen.post_message(Notice(str(exc), "error"))
            return
        self.screen.post_message(Notice(f"sent {command} for cell {cell_key[:8]}"))

    def dump_stacks(self) -> None:
        """The selected running cell's stacks, process tree and last events, in a screen
        of their own (nothing when it does not apply)."""
        screen = self.screen
        cell = screen.selected_cell()
        if cell is None or not screen.check_action("dump_stacks", ()) or not cell.pid:
            return
        screen.notify(f"asking {cell.label}'s processes for their stacks…", timeout=2,
                      markup=False)
        screen.run_worker(partial(self._dump, Path(cell.log_path).parent, int(cell.pid),
                                  cell.label, cell.attempt), thread=True, group="stacks")

    def why_no_stacks(self) -> None:
        """Notify why ``d`` has no stacks to ask for now (:func:`why_no_stacks`)."""
        screen = self.screen
        reason = why_no_stacks(screen.selected_cell(), screen.replay is not None)
        if reason:
            screen.notify(reason, severity="warning", timeout=6, markup=False)

    def _dump(self, attempt_dir: Path, pid: int, label: str, attempt: int) -> None:
        """(thread worker) Ask for the dump and push the screen that shows it."""
        from fugue_tui.app.models.stack_report import cell_report
        from fugue_tui.app.screens.modals import StackScreen

        app = self.screen.app
        try:
            report = cell_report(attempt_dir, pid, label)
        except OSError as exc:
            self.screen.post_message(Notice(f"no stack dump of {label}: {exc}", "error"))
            return
        app.call_from_thread(app.push_screen, StackScreen(
            f"stacks of {label} attempt {attempt} (pid {pid})", report))
