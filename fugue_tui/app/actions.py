"""Every dashboard action once: a stable id, its default keys, what it does.

Screens build their ``BINDINGS`` from here, the footer and the command palette show them,
``?`` lists them, and a user's keymap file remaps them by id (``App.set_keymap``), so a key
is changed in one place. Textual-free apart from :func:`bindings`.

Keymap file: ``$FUGUE_CONFIG_DIR/keymap.toml``, else ``~/.config/fugue-tui/keymap.toml``::

    [keymap]
    "run.retry" = "R"            # one key
    "plan.launch" = "ctrl+r,f5"  # several, comma-separated

    [alerts]                     # a cell turning suspect or hung (fugue_tui.app.alerts)
    bell = true
    notify = true
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.define import tomlfile
from engine.errors import ConfigError, nearest


@dataclass(frozen=True)
class Action:
    """One bindable action: ``id`` (keymaps use it), default ``key`` (comma-separated
    alternatives, Textual key names), the ``action`` string Textual runs, a short
    ``description`` for the footer and a longer ``help`` for ``?`` and the palette."""

    id: str
    key: str
    action: str
    description: str
    help: str
    show: bool = True
    priority: bool = False


APP = (
    Action("app.help", "question_mark", "app.help", "help", "show every key and its id"),
    Action("app.results", "f3", "app.results", "all results",
           "the Results screen of every row of the runs folder: filter, sort, provenance, "
           "speedup charts, export"),
    Action("app.replay", "f4", "app.replay", "replay",
           "replay a finished campaign's run folder or an events file in the run screen"),
    Action("app.quit", "q,ctrl+q", "app.request_quit", "quit",
           "quit; while a campaign runs, asks: stop it or detach (it keeps running)",
           priority=True),
)

PLAN = (
    Action("plan.toggle", "space", "toggle_selection", "select",
           "select or deselect the experiment (or the whole group) under the cursor",
           show=False),
    Action("plan.select-available", "a", "select_available", "all here",
           "select every experiment that can run on this machine"),
    Action("plan.clear", "c", "clear_selection", "clear", "deselect every experiment"),
    Action("plan.undo", "u", "undo_selection", "undo",
           "undo the last change of the experiment selection (space, a, c)", show=False),
    Action("plan.launch", "ctrl+r", "launch", "launch",
           "start the campaign (the runner process) and open the run screen", priority=True),
    Action("plan.save", "ctrl+s", "save", "save", "save the plan as a campaign TOML file",
           priority=True),
    Action("plan.load", "ctrl+o", "load", "load", "load a campaign TOML file into the plan",
           priority=True),
    Action("plan.attach", "ctrl+t", "attach", "attach",
           "attach to a campaign that is running (its runner is alive)", priority=True),
    # Not in the footer: the title line names the key beside the verdict it refreshes.
    Action("plan.selfcheck", "f6", "selfcheck", "self-check",
           "run fugue-tui selfcheck (the parity contract on this machine, under a minute) "
           "and show its verdict in the title line", show=False),
)

#: Jump keys to the sections of the plan's settings form (about 20 Tabs reached the
#: executors, issue 47): the focus moves to the section's first field. Alt and a letter of
#: the section, as a field takes every plain key as text. Not alt and a digit: Textual
#: reads ESC 1, what a terminal sends for it, as macOS's option-1 character ``¡``; not
#: alt+b or alt+f: ESC b and ESC f are ctrl+left and ctrl+right there. Priority bindings,
#: so that they act from a field and the keys typed right after the jump land in the field
#: it moved to (as :data:`FOCUS`). Each section's title shows its key.
PLAN_SECTIONS = tuple(
    Action(f"plan.section-{name}", key, f"jump('{name}')", name,
           f"settings: jump to the {name} section ({what})", show=False, priority=True)
    for name, key, what in (
        ("campaign", "alt+c", "name, passes, seed, threads, device(s), precision, folders"),
        ("watchdog", "alt+w", "what a hung cell gets, and when"),
        ("budget", "alt+u", "RAM, device memory and cores the campaign may take"),
        ("executors", "alt+e", "which executors, their options, resume"),
    ))

RUN = (
    Action("run.retry", "r", "retry_cell", "kill+retry",
           "kill the selected cell and run it again now (asks first)"),
    Action("run.skip", "s", "skip_cell", "kill+skip",
           "kill the selected cell, or drop it from the queue, and go on (asks first)"),
    Action("run.kill", "x", "kill_cell", "kill",
           "kill the selected running cell; it is not retried (asks first)"),
    Action("run.stop", "S", "stop_campaign", "stop",
           "stop the campaign and keep this screen (asks first): the running cell is "
           "killed and recorded, no process survives; quit (q) offers the same stop",
           show=False),  # a full footer at 80x24 already: the help, the palette and q show it
    Action("run.follow", "f", "follow_running", "follow",
           "select the running cell and keep following whichever cell runs"),
    Action("run.plan", "p", "back_to_plan", "plan",
           "back to the plan screen (once the campaign has ended)"),
    Action("run.results", "v", "show_results", "campaign results",
           "the Results screen of this campaign's rows (updates as rows land)"),
    Action("run.stacks", "d", "dump_stacks", "stacks",
           "dump the stacks of every thread of the selected running cell's Python processes "
           "(kept beside its log), shown with its process tree and last events"),
    Action("run.zoom", "z", "zoom", "zoom",
           "show one pane on the whole screen, cycling cells, jobs, monitor, log, events "
           "(there each line in full, a busy-host warning too), then all of them again "
           "(a small terminal shows the monitor only so)"),
    Action("run.monitor", "t", "monitor_view", "timeline",
           "the monitor pane shows, in turn: the selected cell's monitor, the campaign's "
           "host/device timeline with the cells' starts and ends, and the loss and "
           "validation curves of the selected cell's jobs across executors (a small "
           "terminal zooms to the pane)"),
    Action("run.back", "escape", "back", "back",
           "close a replay, or leave a campaign that has ended (the screen before it)"),
    # Not in the footer (full at 80x24): the help and the palette show them, the cell
    # pane's title shows the filter.
    Action("run.filter", "F", "cell_set('filter')", "filter",
           "filter the cells by status, executor or experiment from a list with their "
           "counts (a picked value again drops it; 'clear' shows all); the cells pane's "
           "title says how many it shows of how many, a running cell always shows",
           show=False),
    Action("run.retry-failed", "R", "cell_set('retry_failed')", "retry failed",
           "retry every failed cell of the campaign (asks once, naming the count; one "
           "control retry per cell, as r sends)", show=False),
    Action("run.skip-queued", "K", "cell_set('skip_queued')", "skip queued of exp",
           "skip every queued cell of the selected cell's experiment, or of one picked from "
           "a list (asks once, naming the count; one control skip per cell, as s sends)",
           show=False),
)

#: The process view's keys, and the run screen's key that opens it (listed here, together
#: in the help; the run screen binds it).
PROCESSES = (
    Action("run.processes", "P", "show_processes", "processes",
           "the campaign's processes (runner, cells, workers, monitors, Ray) with CPU, RSS "
           "and GPU memory, sortable, and a cell's process killed by pid (asks first; the "
           "runner records the kill)", show=False),
    Action("procs.sort", "o", "pick_sort", "sort by",
           "the process view: pick the column to sort by (the sorted one again reverses it)"),
    Action("procs.reverse", "O", "reverse_sort", "reverse",
           "the process view: reverse the sort order"),
    Action("procs.kill", "x", "kill_selected", "kill",
           "the process view: kill the selected process's cell through the runner (asks "
           "first, naming the pid and its command; recorded as a control command)"),
    Action("procs.kill-pid", "K", "kill_pid", "kill pid…",
           "the process view: type a pid to kill (only a process of this campaign's cells)"),
    Action("procs.back", "escape", "back", "back", "back to the run screen"),
)

RESULTS = (
    # priority: the keys typed right after "/" go to the box (see FOCUS)
    Action("results.filter", "slash", "focus_filter", "filter",
           "edit the filter (exp:, executor:, scheduler:, features:, gpu:, host:, campaign:)",
           priority=True),
    Action("results.sort", "o", "pick_sort", "sort by",
           "pick the column to sort the rows by from a list (the sorted one again reverses "
           "it; a header click sorts too)"),
    Action("results.reverse", "O", "reverse_sort", "reverse", "reverse the sort order"),
    # Not in the footer (full at 80x24): the help, the palette and the table's title (when
    # columns are hidden) name it.
    Action("results.columns", "c", "pick_columns", "columns",
           "choose the columns shown from a checklist (space toggles, enter applies, d: "
           "all again); saved for this user beside the keymap, restored next time",
           show=False),
    Action("results.export", "e", "export", "export",
           "write the figures (PNG, SVG) and the LaTeX table of the rows shown to a folder"),
    Action("results.back", "escape", "back", "back", "back to the previous screen"),
    Action("results.copy-key", "y", "copy_key", "copy key",
           "copy the selected row's cell key to the clipboard (OSC 52) and show it, to "
           "select by hand where the terminal ignores OSC 52", show=False),
)

REPLAY = (
    Action("replay.pause", "space", "toggle_pause", "play/pause", "pause or resume the replay"),
    Action("replay.step", "n", "step", "step", "apply the next event (pauses the replay)"),
    Action("replay.faster", "plus,equals_sign", "faster", "faster",
           "replay twice as fast"),
    Action("replay.slower", "minus", "slower", "slower", "replay half as fast"),
    Action("replay.end", "E", "to_end", "to end", "apply every remaining event at once"),
    # Seeks: in the help and the palette, not the footer (at 160 columns it is full: "? help"
    # and "^q quit" were pushed off it).
    Action("replay.back", "left_square_bracket", "seek(-1)", "rewind",
           "seek back a 20th of the campaign (at least 10 s of campaign time)", show=False),
    Action("replay.forward", "right_square_bracket", "seek(1)", "skip ahead",
           "seek forward a 20th of the campaign (at least 10 s of campaign time)", show=False),
    Action("replay.seek", "T", "seek_to", "seek to",
           "seek to a time from the start (m:ss or seconds), backwards or forwards",
           show=False),
)

#: The run screen's navigation (issue 48, item 2): jump to a pane, search the log or the
#: events, open the selected cell's files in a pager or an editor, copy its key or folder.
#: Not in the footer (full at 80x24): ``?`` and the palette list them. ``n``/``N`` and
#: Escape act only while a search is open (else they do not apply, and replay's step and
#: back, bound after them on the screen, act and show in the footer).
RUN_NAV = (
    Action("run.jump-cells", "1", "jump('cells')", "to cells",
           "put the keys on the cells pane (a zoom that hides it shows every pane again)",
           show=False),
    Action("run.jump-jobs", "2", "jump('jobs')", "to jobs", "put the keys on the jobs pane",
           show=False),
    Action("run.jump-log", "3", "jump('log')", "to log",
           "put the keys on the log pane (/ then searches it)", show=False),
    Action("run.jump-events", "4", "jump('events')", "to events",
           "put the keys on the events pane (/ then searches it)", show=False),
    # priority: the keys typed right after "/" go to the search line (see FOCUS)
    Action("run.search", "slash", "search_open", "search",
           "search the log (the events when that pane has the keys or is zoomed): type, "
           "Enter keeps the matches (n/N: next/previous, around the end), Escape closes",
           show=False, priority=True),
    Action("run.search-next", "n", "search_next", "next match",
           "while a search is open: the next matching line (after the last, the first)",
           show=False),
    Action("run.search-previous", "N", "search_previous", "previous match",
           "while a search is open: the previous matching line (before the first, the last)",
           show=False),
    Action("run.search-close", "escape", "search_close", "close search",
           "while a search is open: close it and clear its highlights", show=False),
    Action("run.pager", "o", "open_file('log', 'PAGER')", "pager",
           "open the selected cell's log in $PAGER (less when unset); quit it to come back",
           show=False),
    Action("run.pager-events", "O", "open_file('events', 'PAGER')", "events in pager",
           "open the selected cell's events file (events.jsonl) in $PAGER", show=False),
    Action("run.editor", "e", "open_file('log', 'EDITOR')", "editor",
           "open the selected cell's log in $EDITOR ($VISUAL, else vi); quit it to come back",
           show=False),
    Action("run.copy-key", "y", "copy('key')", "copy key",
           "copy the selected cell's key to the clipboard (OSC 52) and show it, to select "
           "by hand where the terminal ignores OSC 52", show=False),
    Action("run.copy-path", "Y", "copy('path')", "copy folder",
           "copy the selected cell's attempt folder (its cell.log, events.jsonl) to the "
           "clipboard (OSC 52) and show it", show=False),
)

#: The focus moves as *priority* bindings of the app: Textual's own tab binding is the
#: screen's, run only once the key has reached the focused widget's queue, so keys typed
#: right after it ("Tab 5" in one read) were already queued for the field being left, and
#: replaced its selected value (issue 47). A priority binding moves the focus in the app's
#: queue, before the next key is routed. tests/unit/fugue_tui/app/test_upstream_focus_keys.py
#: says when upstream stops needing this.
FOCUS = (
    Action("focus.next", "tab", "app.focus_next", "next field",
           "move the focus to the next field or pane", show=False, priority=True),
    Action("focus.previous", "shift+tab", "app.focus_previous", "previous field",
           "move the focus to the previous field or pane", show=False, priority=True),
)

#: Escape in a field gives the keys back to its pane (``?``, ``a``… act again; a field took
#: them as text). A priority binding of the screens with fields, for the same reason as
#: :data:`FOCUS`; it stands aside (``SkipAction``) where the focus is not in a field.
LEAVE = (
    Action("focus.leave", "escape", "leave_field", "leave field",
           "in a field: leave it for its pane (the keys act there again: ? opens this help)",
           show=False, priority=True),
)

#: Vim-style aliases beside the arrows, for tables, trees and the log.
NAV = (
    Action("nav.down", "j", "cursor_down", "down", "move down", show=False),
    Action("nav.up", "k", "cursor_up", "up", "move up", show=False),
    Action("nav.top", "g", "scroll_top", "top", "first row", show=False),
    Action("nav.bottom", "G", "scroll_bottom", "bottom", "last row", show=False),
)

#: The same keys for a scrolling pane (the run screen's job pane and log): they scroll it.
SCROLL_NAV = (
    Action("nav.down", "j", "scroll_down", "down", "scroll down", show=False),
    Action("nav.up", "k", "scroll_up", "up", "scroll up", show=False),
    Action("nav.top", "g", "scroll_home", "top", "the top", show=False),
    Action("nav.bottom", "G", "scroll_end", "bottom", "the end", show=False),
)

ALL = APP + FOCUS + LEAVE + PLAN + PLAN_SECTIONS + RUN + RESULTS + REPLAY + NAV + RUN_NAV + PROCESSES


def bindings(actions: tuple[Action, ...]):
    """Textual ``Binding`` objects for ``actions`` (ids kept, so keymaps apply)."""
    from textual.binding import Binding

    return [Binding(a.key, a.action, a.description, show=a.show, priority=a.priority,
                    tooltip=a.help, id=a.id) for a in actions]


def by_id(action_id: str) -> Action:
    for a in ALL:
        if a.id == action_id:
            return a
    raise KeyError(action_id)


def keymap_path() -> Path:
    """Where the user's keymap lives (the file need not exist)."""
    from engine.dirs import config_dir

    return config_dir() / "keymap.toml"


def load_keymap(path: str | Path | None = None) -> dict[str, str]:
    """The user's keymap: binding id → keys. A missing file is an empty keymap.

    Raises:
        ConfigError: malformed TOML (file, line), an unknown id (with the nearest one), or
            a value that is not a non-empty string.
    """
    path = Path(path) if path is not None else keymap_path()
    if not os.path.lexists(path):
        return {}
    # Anything there that is not a regular file (a folder, a FIFO, a link to /dev/zero) is
    # named by the TOML reader rather than silently ignored (issue 44).
    doc = tomlfile.load(path, kind="keymap file")
    # [alerts]: fugue_tui.app.alerts reads it (the bell, the notifications)
    tomlfile.check_keys(doc, {"keymap": (dict,), "alerts": (dict,)}, str(path))
    keymap = doc.get("keymap", {})
    ids = [a.id for a in ALL]
    for action_id, keys in keymap.items():
        if action_id not in ids:
            raise ConfigError(f"{path}: keymap: unknown binding id '{action_id}'"
                              f"{nearest(action_id, ids)}")
        if not isinstance(keys, str) or not keys.strip():
            raise ConfigError(f"{path}: keymap.{action_id}: expected keys as a string such as "
                              f"\"ctrl+r\" or \"r,f5\", got {keys!r}")
    return {k: v.strip() for k, v in keymap.items()}
