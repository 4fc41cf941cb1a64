"""Modal dialogs: confirm a destructive action, quit while a campaign runs (stop or detach),
ask for a file path, and the ``?`` help listing every binding with its id and key."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from fugue_tui.app.actions import ALL, SCROLL_NAV, bindings, keymap_path


class ConfirmScreen(ModalScreen[bool]):
    """Yes / no. ``y`` or Enter on Yes confirms; ``n`` or Escape cancels."""

    BINDINGS = [Binding("y", "answer(True)", "yes", id="confirm.yes"),
                Binding("n,escape", "answer(False)", "no", id="confirm.no")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            with Horizontal(id="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button("Cancel (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class QuitScreen(ModalScreen[str]):
    """Quit while a campaign runs: ``stop`` (nothing survives), ``detach`` (the runner
    keeps going headless) or ``cancel``."""

    BINDINGS = [Binding("s", "choose('stop')", "stop", id="quit.stop"),
                Binding("d", "choose('detach')", "detach", id="quit.detach"),
                Binding("escape,c", "choose('cancel')", "cancel", id="quit.cancel")]

    def __init__(self, campaign: str) -> None:
        super().__init__()
        self.campaign = campaign

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"Campaign '{self.campaign}' is running.\n"
                        "Stop it (the running cell is killed and recorded; no process "
                        "survives), or detach (the runner keeps going headless; "
                        "`fugue-tui dashboard --attach` finds it again)?", id="question")
            with Horizontal(id="buttons"):
                yield Button("Stop (s)", id="stop", variant="error")
                yield Button("Detach (d)", id="detach", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)


class PathScreen(ModalScreen[str | None]):
    """Ask for a file path (Enter accepts, Escape cancels).

    ``arm_s``: Enter is taken as the answer only once the dialog has been on screen that
    long. Keys typed ahead (a filter typed while the focus had left the filter box: the
    ``e`` of "killed" opens the export dialog and the Enter that followed answered it) would
    otherwise run what the dialog asks before anyone saw it; an early Enter says so instead.
    """

    BINDINGS = [Binding("escape", "cancel", "cancel", id="path.cancel")]

    def __init__(self, title: str, value: str = "", arm_s: float = 0.0,
                 choices: list[tuple[str, str]] | None = None) -> None:
        super().__init__()
        self.title_text, self.value, self.arm_s = title, value, arm_s
        #: Paths offered under the box as ``(path, label)`` (a recent run folder…): the
        #: one highlighted is typed into the box, Enter on it answers with it.
        self.choices = list(choices or ())
        self._shown_at = float("inf")
        #: Enters refused because they came before the dialog could be read (tests read it).
        self.early_enters = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="question")
            yield Input(self.value, id="path")
            hint = Label("", id="path-hint")
            hint.display = False  # a dialog's size unchanged until it has something to say
            yield hint
            if self.choices:
                yield OptionList(*(Option(label, id=path) for path, label in self.choices),
                                 id="path-choices")

    def on_mount(self) -> None:
        self._shown_at = time.monotonic()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if time.monotonic() - self._shown_at < self.arm_s:
            self.early_enters += 1
            hint = self.query_one("#path-hint", Label)
            hint.display = True
            hint.update(Text("Enter came too soon (typed ahead?): check, then Enter again",
                             style="bold yellow"))  # one line of the narrowest dialog
            return
        self.dismiss(event.value.strip() or None)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.has_focus and event.option.id:  # the user moving, not the mount
            self.query_one("#path", Input).value = event.option.id

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


#: Keys the widgets have of their own (Textual's: no binding id, not remappable).
BUILT_IN = (
    ("up, down", "move in the table, tree, form or text that has the focus"),
    ("pgup, pgdn", "a page up or down (this help too)"),
    ("home, end", "the first or the last line"),
    ("ctrl+p", "command palette: the actions that apply now (type 'help' for this help)"),
)
#: Below this many columns the help lays out one line per key (its text cut to fit), so
#: that a small terminal shows many keys at once and scrolls to the rest; wider, it wraps.
NARROW_HELP = 100


def key_names(keys: str) -> str:
    """Textual key names as a user reads them: ``"plus,equals_sign"`` -> ``"+, ="``,
    ``"slash"`` -> ``"/"``, ``"escape"`` -> ``"esc"``."""
    from textual.keys import format_key

    return ", ".join(format_key(k.strip()) for k in keys.split(",") if k.strip())


def help_table(keymap: dict[str, str], width: int = NARROW_HELP) -> Table:
    """Every action: the keys in effect (after the user's keymap), what it does, its id
    (for the keymap), then the widgets' own keys. Narrower than :data:`NARROW_HELP`
    columns: one line a key, its text cut at a word with an ellipsis (the palette has it
    whole; cut by Rich it ended mid-word, "the Results screen of every r…")."""
    from fugue_tui.app.models.form_fields import fit_hint

    rows = [(key_names(keymap.get(a.id, a.key)), a.help, a.id) for a in ALL]
    rows += [(keys, text, "") for keys, text in BUILT_IN]
    narrow = width < NARROW_HELP
    table = Table(box=None, padding=(0, 1) if narrow else (0, 2), header_style="bold")
    if narrow:
        keys_w = max(len(r[0]) for r in rows)
        ids_w = max(len(r[2]) for r in rows)
        # each of the three columns is padded by one space on either side
        text_w = max(10, width - keys_w - ids_w - 6)
        rows = [(keys, fit_hint(text, text_w), id_) for keys, text, id_ in rows]
        table.add_column("keys", no_wrap=True)
        table.add_column("what it does", no_wrap=True, overflow="ellipsis", width=text_w)
        table.add_column("binding id", no_wrap=True, style="dim")
    else:
        for column in ("keys", "what it does", "binding id"):
            table.add_column(column)
    for row in rows:
        table.add_row(*row)
    return table


class HelpBody(VerticalScroll):
    """The help's scrolling body: the arrows, pgup/pgdn, home/end and j/k/g/G scroll it."""

    BINDINGS = bindings(SCROLL_NAV)


class HelpScreen(Screen[None]):
    """``?``: the keys, their binding ids (for the keymap) and the keymap file. An opaque
    screen, not a modal: a modal's translucent backdrop makes Textual repaint the whole
    screen under it (charts included), which doubled the time from the key to the help."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "close", id="help.close")]

    def __init__(self, keymap: dict[str, str]) -> None:
        super().__init__()
        self.keymap = keymap
        self._width = 0

    def compose(self) -> ComposeResult:
        with HelpBody(id="dialog"):
            yield Static(Text("fugue-tui dashboard: keys (j/k, pgdn scroll · esc closes)",
                              style="bold"))
            yield Static(Text(f"Remap any binding by id in {keymap_path()}:  [keymap]  "
                              "\"run.retry\" = \"R\"\n", style="dim"))
            yield Static(self._table(), id="help-table")

    def on_mount(self) -> None:
        self.query_one(HelpBody).focus()  # the scroll keys scroll the help

    def on_screen_resume(self) -> None:
        """The app keeps this screen between openings: a terminal resized meanwhile needs
        the table laid out at the new width, and each opening starts at the top (it opened
        where the last one was left, its title scrolled off)."""
        if self._width != self._table_width():
            self.query_one("#help-table", Static).update(self._table())
        self.query_one(HelpBody).scroll_home(animate=False, immediate=True)

    def _table_width(self) -> int:
        return help_width(self.app.size.width)

    def _table(self) -> Text:
        width = self._width = self._table_width()
        return help_text(self.app.console, self.keymap, width)

    def action_close(self) -> None:
        # Not Screen's own "dismiss" action: it is asynchronous (it first waits for the
        # screen's pending callbacks), this closes the help at once.
        self.dismiss(None)


def help_width(terminal_width: int) -> int:
    """The help table's width in a terminal ``terminal_width`` columns wide: the dialog's
    (95 %, at most 146 columns) less its border and padding. At 150x48 every line fits
    unwrapped and the whole help fits without scrolling (a scrollbar appearing cost the
    opening a second layout pass); below :data:`NARROW_HELP` it scrolls, less its bar."""
    width = max(40, min(146, int(terminal_width * 0.95)) - 6)
    # narrow, the help scrolls: its scroll bar takes two columns
    return width - 2 if width < NARROW_HELP else width


def help_text(console, keymap: dict[str, str], width: int) -> Text:
    """:func:`help_table` laid out at ``width`` as styled lines, once per keymap and width
    (Rich's table layout took longer than the rest of opening the screen). Thread-safe
    enough to be warmed from a worker: the worst case lays the table out twice."""
    key = (tuple(sorted(keymap.items())), width)
    text = _HELP_CACHE.get(key)
    if text is None:
        from fugue_tui.app.widgets.job_progress import prerender

        text = prerender(console, help_table(keymap, width), width)
        _HELP_CACHE.clear()
        _HELP_CACHE[key] = text
    return text


_HELP_CACHE: dict = {}


class StackScreen(ModalScreen[None]):
    """A running cell's stack dumps, process tree and last events
    (:func:`fugue_tui.app.models.stack_report.cell_report`); Escape closes."""

    BINDINGS = [Binding("escape,q", "close", "close", id="help.close-stacks")]

    def __init__(self, title: str, report: str) -> None:
        super().__init__()
        self.title_text, self.report = title, report

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="stacks"):
            yield Label(Text(self.title_text, style="bold"), id="question")
            with VerticalScroll(id="stacks-body"):
                yield Static(Text(self.report), id="stacks-text")
            yield Label(Text("Escape closes · the dumps stay beside the cell's log",
                             style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
