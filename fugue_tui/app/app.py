"""The dashboard App: screens, keymap, help, the command palette and quitting.

``FugueApp(campaign=..., attach=..., runs_dir=...)`` opens the plan screen (with a campaign
file loaded when given) and, with ``attach``, the run screen of that run folder on top.
Quitting while a campaign's runner is alive asks: stop it (nothing survives) or detach (the
runner keeps going; ``farewell`` says how to attach again). Exit status: 0, or 2 when the
user's keymap file is invalid is only reported, never fatal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from rich.markup import escape
from textual.app import App, SystemCommand
from textual.screen import Screen

from engine.errors import ConfigError
from engine.runfolder import RunFolder
from fugue_tui.app.actions import APP, FOCUS, bindings, load_keymap
from fugue_tui.app.alerts import AlertSettings, load_alerts
from fugue_tui.app.process import RunnerHandle, find_runner
from fugue_tui.app.screens.modals import HelpScreen, QuitScreen
from fugue_tui.app.screens.plan import PlanScreen
from fugue_tui.app.screens.run import RunScreen

#: Binding ids the palette does not offer (moves and the tree's own toggle).
_NOT_IN_PALETTE = ("nav.", "focus.", "plan.toggle", "confirm.", "quit.", "path.", "help.",
                   "results.back")


class FugueApp(App):
    """fugue-tui's dashboard (see the module docstring)."""

    CSS_PATH = "app.tcss"
    TITLE = "fugue-tui"
    BINDINGS = bindings(APP + FOCUS)

    def __init__(self, campaign: str | None = None, attach: str | None = None,
                 runs_dir: str = "runs", keymap_file: str | Path | None = None,
                 clock: Callable[[], float] = time.time, results: str | None = None,
                 replay: str | None = None, replay_speed: float = 1.0) -> None:
        super().__init__()
        self.campaign_file = campaign
        self.attach_dir = attach
        self.results_source = results
        self.replay_source = replay
        self.replay_speed = replay_speed
        self.runs_dir = runs_dir
        self.keymap_file = keymap_file
        self.clock = clock
        self.keymap: dict[str, str] = {}
        #: Bell and notification for a suspect or hung cell (the keymap file's [alerts]).
        self.alert_settings = AlertSettings()
        #: A line printed after the dashboard exits (how to attach again, what stopped).
        self.farewell = ""
        self._help_screen: HelpScreen | None = None

    def on_mount(self) -> None:
        bad = ""
        try:
            self.keymap = load_keymap(self.keymap_file)
            self.set_keymap(self.keymap)
        except ConfigError as exc:
            bad = str(exc)
            self.notify(bad, title="keymap ignored", severity="error", timeout=20,
                        markup=False)
        try:
            self.alert_settings = load_alerts(self.keymap_file)
        except ConfigError as exc:  # said once when the keymap's error is the same
            if str(exc) != bad:
                self.notify(str(exc), title="alerts: the defaults kept", severity="error",
                            timeout=20, markup=False)
        self.run_worker(self._warm_help, thread=True, group="warm", exit_on_error=False)
        self.push_screen(PlanScreen(self.runs_dir, self.campaign_file))
        if self.attach_dir:
            self.attach(self.attach_dir)
        if self.replay_source:
            self.open_replay(self.replay_source)
        if self.results_source:
            self.action_results(self.results_source)

    # -- screens --------------------------------------------------------------------------
    def open_run(self, run_dir: Path, handle: RunnerHandle | None, offset: int,
                 attached: bool = False) -> RunScreen:
        screen = RunScreen(run_dir, handle, offset, attached=attached, clock=self.clock)
        self.push_screen(screen)
        return screen

    def attach(self, run_dir: str | Path) -> RunScreen | None:
        """Open a campaign's run folder: live when its runner is alive, else as it ended
        (its latest session, rebuilt from the event files)."""
        from engine.observe.follow import last_session_offset

        run_dir = Path(run_dir)
        if not RunFolder(run_dir).runner_log.is_file():
            self.notify(f"{run_dir}: not a campaign run folder (no runner.jsonl)",
                        severity="error", timeout=10, markup=False)
            return None
        handle = find_runner(run_dir)
        if handle is None:
            self.notify(f"{run_dir}: no runner is running; showing how it ended",
                        severity="warning", markup=False)
        return self.open_run(run_dir, handle, last_session_offset(run_dir), attached=True)

    def open_replay(self, source: str | Path, paused: bool = False) -> RunScreen | None:
        """Replay a finished campaign's run folder, or an events file, in a run screen."""
        from engine.errors import FugueError
        from fugue_tui.app.models.replay import Replay

        live = find_runner(source) if Path(source).is_dir() else None
        if live is not None:  # a replay of a campaign still running would end mid-way
            self.notify(f"{source}: its campaign is still running (runner pid {live.pid}): "
                        "watch it live (ctrl+t attaches) or replay it once it has ended",
                        severity="warning", timeout=10, markup=False)
            return None
        try:
            replay, run_dir = Replay.open(source, speed=self.replay_speed, paused=paused)
        except (FugueError, OSError) as exc:
            self.notify(str(exc), severity="error", timeout=10, markup=False)
            return None
        screen = RunScreen(run_dir or Path(source), None, 0, replay=replay)
        self.push_screen(screen)
        return screen

    def action_replay(self) -> None:
        from fugue_tui.app.screens.modals import PathScreen

        def chosen(path: str | None) -> None:
            if path:
                self.open_replay(path)
        # The campaign on screen when it has ended (the one a user most likely means),
        # else the runs folder to complete from.
        run = next((s for s in reversed(self.screen_stack) if isinstance(s, RunScreen)), None)
        default = (str(run.run_dir) if run is not None and run.replay is None
                   and not run.runner_alive else str(Path(self.runs_dir)) + "/")
        self.push_screen(PathScreen("Replay a campaign: its run folder (runs/<name>) or an "
                                    "events file (.jsonl):", default), chosen)

    def action_results(self, source: str | None = None) -> None:
        """The Results screen of ``source`` (default: the runs folder)."""
        from fugue_tui.app.screens.results import ResultsScreen

        self.push_screen(ResultsScreen(source or self.runs_dir))

    def _warm_help(self) -> None:
        """Lay the help table out before the first ``?`` (a thread: no widget access)."""
        from fugue_tui.app.screens.modals import help_text, help_width

        help_text(self.console, dict(self.keymap), help_width(self.size.width))

    def action_help(self) -> None:
        """The help screen, built once per keymap and installed: opening it again only
        lays it out and paints it (composing it, styling its widgets and laying its table
        out took most of the time from ``?`` to the help on screen)."""
        help_screen = self._help_screen
        if help_screen is None or help_screen.keymap != self.keymap:
            if help_screen is not None:
                self.uninstall_screen("help")
            help_screen = self._help_screen = HelpScreen(dict(self.keymap))
            self.install_screen(help_screen, "help")
        if help_screen not in self.screen_stack:  # already open: nothing to do
            self.push_screen("help")

    # -- quitting -------------------------------------------------------------------------
    def _live_run(self) -> RunScreen | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, RunScreen) and screen.runner_alive:
                return screen
        return None

    def action_request_quit(self) -> None:
        run = self._live_run()
        if run is None:
            self.exit()
            return
        if run.stopping:
            return
        name = run.view.state.campaign or run.run_dir.name

        def chosen(choice: str | None) -> None:
            if choice == "detach":
                pid = run.handle.pid if run.handle else "?"
                self.farewell = (f"detached: campaign {name} keeps running (runner pid {pid}); "
                                 f"attach again with: fugue-tui dashboard --attach {run.run_dir}")
                self.exit()
            elif choice == "stop":
                run.begin_stop(partial(self._stopped, name))
        self.push_screen(QuitScreen(name), chosen)

    def _stopped(self, name: str, forced: list[int]) -> None:
        extra = f" (SIGKILL needed for pids {forced})" if forced else ""
        self.farewell = f"stopped campaign {name}: no runner or cell process is left{extra}"
        self.exit()

    # -- command palette ------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Only what applies now: the screen's enabled bindings, then the theme."""
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not active.enabled or not binding.id or binding.id in seen or \
                    binding.id.startswith(_NOT_IN_PALETTE):
                continue
            seen.add(binding.id)
            key = self.get_key_display(binding)
            # The help text is markup: a key such as "/" or "a" in brackets would be read as
            # a tag ("[/]" closes nothing and crashed the palette), so escape it.
            yield SystemCommand(binding.description, escape(f"{binding.tooltip} [{key}]"),
                                partial(self._palette_run, active.node, binding.action))
        if "app.help" not in seen:  # in a field "?" is text, so the binding is not active
            yield SystemCommand("help", "show every key and its id [? outside a field]",
                                self.action_help)
        yield SystemCommand("Theme", "Change the current theme", self.action_change_theme)

    async def _palette_run(self, node, action: str) -> None:
        await self.run_action(action, node)
