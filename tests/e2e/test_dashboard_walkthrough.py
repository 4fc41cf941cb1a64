"""Issue 47's walk-through in a real terminal: tmux starts ``fugue-tui dashboard`` on a
tiny K-sweep campaign and drives it with keys alone (``tmux send-keys``), at 160×48 and at
80×24, one tmux session per size, through what a first-time user tripped over:

7. the catalogue shows its cursor line from the start, the first Tab lands on a field, and
   alt+w / alt+e / alt+c jump to the watchdog, executors and campaign sections;
1. keys typed right after Tab land in the field Tab moved to;
3. ``c`` acts on the catalogue only (not on a settings checkbox), and ``u`` undoes it;
9. Escape leaves a field so that ``?`` opens the help (which lists Tab and j/k), and the
   palette answers ``help``;
8. the header's ``elapsed`` clock ticks every second; the job pane shows the cell's clock;
2/4. the "speedup so far" strip updates at the cell ends and its labels carry the K;
6. after cycling ``z`` through the zooms, j/k move the cell cursor without a Tab;
5. through a resize to the other size and back, the run screen's campaign line stays one
   line, the strip shows whole items and the footer ends at ``^p palette``;
then quit: the dashboard exits 0 and leaves no process.

Each item is one function (a *step*) taking the :class:`Walk`; :data:`PLAN_STEPS` run on
the plan screen, :data:`RUN_STEPS` after the launch. Add an item's step to its list. A step
waits on the exact text it asserts (no fixed sleeps but the clock's 1.5 s); a timeout
prints the captured screen. A check that later steps do not depend on (:meth:`Walk.check`)
is recorded and the walk goes on: the test fails at its end naming each, with its screen.
Each size prints its time, step by step, and the load (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

TMUX = shutil.which("tmux")
ROOT = Path(__file__).resolve().parents[2]

#: Waits on the screen: generous, for a loaded two-core host.
UI_S = 60.0
#: The dashboard's start (Python, Textual, the catalogue) and the campaign's four cells.
START_S = 120.0
CAMPAIGN_S = 300.0

EXPERIMENTS = "[experiments.D_ens]\nepochs = 1\n"
#: Four cells: seq and unified_model at K=1 and K=2 (the strip's labels must tell the K).
CAMPAIGN = ('name = "walk"\nexperiments = "D_ens"\nexecutors = ["seq", "unified_model"]\n'
            'device = "cpu"\nthreads = 1\nk_sweep = [1, 2]\n'
            'experiments_file = "experiments.toml"\n')
CELLS = 4

#: Where the keys go, as the plan screen marks it without colour: ``─ > settings`` on the
#: focused pane's title, ``│ > seed`` on the focused field's label (a checkbox's label
#: after its box, ``▐ ▌ > resume``).
FOCUS = re.compile(r"─ > [a-z]+|│ (?:▐.▌ )?> ")
#: The help screen's top edge.
HELP_FRAME = "█▀▀▀▀▀▀▀▀▀▀"


@dataclass
class Walk:
    """One tmux session running the dashboard, and what the steps learnt of it."""

    socket: str
    size: tuple[int, int]
    workdir: Path
    #: An environment variable's value only the dashboard and its descendants carry.
    marker: str
    dashboard_pid: int = 0
    #: Every screen captured, with its time (time.time(), the clock of the runner's
    #: events): a later step can ask when something first showed (the strip's speedups
    #: after each cell end).
    history: list[tuple[float, str]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    #: What a step found wrong without it stopping the walk (:meth:`check`).
    defects: list[str] = field(default_factory=list)

    def check(self, ok: object, what: str, screen: str) -> None:
        """A check the later steps do not depend on: a failure is recorded, the walk goes
        on, and the test fails at its end naming every one (with its screen)."""
        if not ok:
            self.defects.append(f"{self.size[0]}x{self.size[1]}: {what}; the screen:\n{screen}")

    def tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True,
                              text=True, check=True, env=tmux_env()).stdout

    def keys(self, *keys: str) -> None:
        """Send ``keys`` (tmux key names: ``Tab``, ``BTab``, ``Escape``, ``C-p``) in one
        write: they reach the dashboard back to back, as when typed quickly."""
        self.tmux("send-keys", "-t", "dash", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "dash", "-l", text)

    def screen(self) -> str:
        text = self.tmux("capture-pane", "-p", "-t", "dash")
        self.history.append((time.time(), text))
        return text

    def wait(self, check: str | Callable[[str], object], what: str,
             timeout: float = UI_S) -> str:
        """The first screen showing ``check`` (a text, or a test of the screen); on a
        timeout, an AssertionError with the last screen."""
        test = (lambda s: check in s) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if test(screen):
                return screen
            if time.monotonic() > deadline:
                size = self.tmux("display", "-p", "-t", "dash", "#{window_width}x#{window_height}")
                raise AssertionError(f"{size.strip()}: timed out after "
                                     f"{timeout:.0f} s waiting for {what}; the screen:\n{screen}")
            time.sleep(0.1)


def tmux_env() -> dict[str, str]:
    """This process's environment, given explicitly: without ``env`` the tmux server
    inherits the C library's, where readline (imported under pytest) has put
    ``COLUMNS=80 LINES=24``, and the dashboard sized itself by them, not by its pane."""
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


# ------------------------------------------------------------------ reading the screen
def header(screen: str) -> str:
    return screen.splitlines()[0] if screen else ""


def footer(screen: str) -> str:
    lines = screen.rstrip("\n").splitlines()
    return lines[-1] if lines else ""


def field_value(screen: str, name: str) -> str | None:
    """The text shown in the settings field ``name`` (its placeholder, ``default 1``, when
    empty), or None where the field does not show."""
    # the form's scroll bar is drawn in block elements at the pane's right edge (80×24)
    screen = re.sub("[\u2580-\u259f]", " ", screen)
    found = re.search(rf"│ (?:> )?{re.escape(name)} +(\S.*?) *(?:▼ *)?│", screen)
    return found.group(1) if found else None


def elapsed(screen: str) -> str | None:
    """The campaign's clock in the header: ``campaign walk · cpu · elapsed 0:07 ·`` (at
    80×24 the label gives way to the rest while the line is long: ``cpu · 0:07 ·``)."""
    found = re.search(r"^ campaign walk · cpu · (?:elapsed )?(\d+:\d\d) ·", header(screen))
    return found.group(1) if found else None


def strip(screen: str) -> str:
    """The run header's "speedup so far" line ('' while it has none; narrow: ``so far:``)."""
    return next((ln for ln in screen.splitlines()[:3] if "so far: " in ln), "")


def strip_items(screen: str) -> list[str]:
    """The strip's speedups: ``D_ens unified_model K=2 0.47× on 0.52 cores``."""
    return [item for item in strip(screen).split(" · ") if "×" in item]


def speedups_known(screen: str) -> int:
    """How many speedups the strip knows: those it shows and its ``+N more``."""
    more = re.search(r"\+(\d+) more \(v: results\)", strip(screen))
    return len(strip_items(screen)) + (int(more.group(1)) if more else 0)


def selected_cell(screen: str) -> int | None:
    """The number of the cell the job pane shows (the cell table's cursor): ``[3/4] ...``."""
    found = re.search(rf"(?:│|^)\[(\d)/{CELLS}\] D_ens", screen, re.M)  # 80×24: no border
    return int(found.group(1)) if found else None


def focus(screen: str) -> list[str]:
    """Where the screen marks the focus: each mark with the rest of its line (at 80×24 a
    long field's label is cut to its mark, ``│ >      flag``: the value tells the fields
    apart)."""
    return [line[m.start():] for line in screen.splitlines() if (m := FOCUS.search(line))]


def tab_to(w: Walk, mark: str, key: str = "Tab", limit: int = 20) -> str:
    """Press ``key`` (Tab or BTab), one at a time, until the screen shows ``mark`` (a focus
    mark: ``│ > name``, ``─ > catalogue``). Each press waits for the focus to move and the
    marks to hold still for 0.3 s: the field's mark and its pane's can land in different
    frames, and a press sent on the first of them could step past ``mark``."""
    for _ in range(limit):
        screen = w.screen()
        if mark in screen:
            return screen
        before = focus(screen)
        w.keys(key)
        w.wait(lambda s, b=before: focus(s) != b, f"{key} to move the focus "
               f"(on the way to {mark!r}; it was on {before})")
        settled = [focus(w.screen()), time.monotonic()]

        def still(s: str, seen: list = settled) -> bool:
            now = focus(s)
            if now != seen[0]:
                seen[:] = [now, time.monotonic()]
            # the settings pane scrolls its focused field into view a frame or more after
            # the focus moved: until a field's mark shows, the press has not settled
            hidden = any(m.startswith("─ > settings") for m in now) and \
                not any(m.startswith("│") for m in now)
            return not hidden and time.monotonic() - seen[1] >= 0.3

        w.wait(still, f"the focus marks to hold still after {key}")
    raise AssertionError(f"{limit} × {key} never reached {mark!r}:\n{w.screen()}")


# ------------------------------------------------------------------ the plan screen
def item7_the_form_within_reach(w: Walk) -> None:
    """At the start the catalogue has the focus and shows its cursor line (``│> ▼``); one
    Tab lands on the first field, ``name`` (it landed on the form's container, nothing
    marked); alt+w, alt+e and alt+c put the focus on the watchdog's, the executors' and the
    campaign's first field (about 20 Tabs reached the executors)."""
    screen = w.wait(lambda s: "─ > catalogue" in s and re.search(r"│> ▼ ", s),
                    "the catalogue's focus and its cursor line at the start")
    assert not re.search(r"│ (?:▐.▌ )?> ", screen), screen  # no field marked yet
    w.keys("Tab")
    w.wait("│ > name ", "the first Tab to land on the name field")
    for key, where in (("M-w", r"│ > (?:watchdog\.)?action"), ("M-e", r"▌ > seq\b"),
                       ("M-c", r"│ > name ")):
        w.keys(key)
        w.wait(lambda s, r=where: re.search(r, s), f"{key} to jump to {where!r}")


def item1_keys_after_tab_land_in_the_next_field(w: Walk) -> None:
    """``Tab 1 Tab 7 Tab 2`` from ``name``, in one write: passes 1, seed 7, retries 2, the
    name untouched (each digit replaced the value of the field being left: name 1,
    passes 7, seed 2). The launch step reads them back from the campaign that ran."""
    tab_to(w, "│ > name ")
    w.keys("Tab", "1", "Tab", "7", "Tab", "2")
    screen = w.wait(lambda s: "│ > retries " in s and field_value(s, "retries") == "2",
                    "retries focused and 2")
    assert [field_value(screen, f) for f in ("name", "passes", "seed", "retries")] == \
        ["walk", "1", "7", "2"], screen


def item3_selection_keys_act_on_the_catalogue_and_undo(w: Walk) -> None:
    """``c``, ``a``, ``u`` on a settings checkbox (resume) change nothing, and the footer
    does not offer them there; on the catalogue ``c`` clears the selection, says so, and
    ``u`` brings it back."""
    tab_to(w, "─ > catalogue", key="BTab")  # from the top of the settings
    screen = tab_to(w, "> resume", key="BTab")
    assert "[x] D_ens" in screen and "c clear" not in footer(screen), screen
    w.keys("c", "a", "u", "BTab")  # BTab: the focus leaves once c, a and u were handled
    screen = w.wait(lambda s: "> resume" not in s and FOCUS.search(s), "the focus to leave "
                    "resume after c a u")
    assert "[x] D_ens" in screen and "(1/5 selected" in screen, screen
    assert f"{CELLS} cells: {CELLS} run" in screen, screen
    tab_to(w, "─ > catalogue")  # resume, the preview, the catalogue
    w.keys("c")
    w.wait(lambda s: "[ ] D_ens" in s and "(0/5 selected" in s
           and "cleared the selection" in s, "c to clear the selection and say so")
    w.keys("u")
    w.wait(lambda s: "[x] D_ens" in s and f"{CELLS} cells: {CELLS} run" in s,
           "u to bring D_ens back")


def item9_help_from_a_field_and_the_palette(w: Walk) -> None:
    """In a field Escape leaves it for its pane, so ``?`` opens the help instead of typing
    a ``?``; the help lists Tab and j/k; the palette answers ``help``."""
    tab_to(w, "│ > name ")
    w.keys("Escape")
    w.wait(lambda s: "─ > settings" in s and "│ > name " not in s, "Escape to leave the field")
    w.keys("?")
    screen = w.wait("fugue-tui dashboard: keys", "? to open the help")
    assert re.search(r"█ +tab +move the focus to the next.*focus\.next", screen), screen
    w.keys("G")
    screen = w.wait("ctrl+p", "G to show the help's last keys")
    # at 80x24 the help scrolls: the navigation rows sit above its end. Up a line at a
    # time (k): PageUp there moves a page and a row, so a row can be passed over unseen,
    # and a capture during its animation saw rows the settled page did not (CI, s21)
    for _ in range(60):
        if re.search(r"█ +j +move down +nav\.down", screen) or "Remap any binding" in screen:
            break
        w.keys("k")
        screen = w.wait(lambda s, b=screen: s != b, "k to scroll the help up a line")
        screen = w.wait(lambda s, last=[screen]: s == last[0] or last.__setitem__(0, s),
                        "the help to stop scrolling")
    assert re.search(r"█ +j +move down +nav\.down", screen), screen
    assert re.search(r"█ +k +move up +nav\.up", screen), screen
    w.keys("Escape")
    screen = w.wait(lambda s: "plan a campaign" in header(s) and "─ > settings" in s,
                    "Escape to close the help")
    assert field_value(screen, "name") == "walk", screen  # no "?" typed into it
    w.keys("C-p")
    w.wait("Search for commands", "ctrl+p to open the palette")
    w.type("help")
    w.wait(lambda s: "show every key and its id" in s and "start the campaign" not in s,
           "the palette answering 'help'")
    w.keys("Enter")
    # the help opens where it was left (after G: at 80×24 its title is scrolled off)
    w.wait(HELP_FRAME, "the palette's help entry to open the help")
    w.keys("Escape")
    w.wait(lambda s: "plan a campaign" in header(s) and "keys (j/k" not in s,
           "Escape to close the help")


#: The plan screen's steps, in order (then the launch).
PLAN_STEPS: list[Callable[[Walk], None]] = [
    item7_the_form_within_reach,
    item1_keys_after_tab_land_in_the_next_field,
    item3_selection_keys_act_on_the_catalogue_and_undo,
    item9_help_from_a_field_and_the_palette,
]


def launch(w: Walk) -> None:
    """``ctrl+r``: the run screen, and the runner started (it carries the marker, so the
    last check, no process left, can see it and what it starts)."""
    w.keys("C-r")
    pressed = time.monotonic()
    w.wait(elapsed, "the run screen")
    w.timings["ctrl+r to the run screen (s)"] = time.monotonic() - pressed
    deadline = time.monotonic() + UI_S
    while not [p for p in psutil.process_iter() if p.pid != w.dashboard_pid
               and _marked(p, w.marker)]:
        assert time.monotonic() < deadline, "no process of the dashboard's carries its marker"
        time.sleep(0.1)


# ------------------------------------------------------------------ the run screen
def item8_clocks_tick(w: Walk) -> None:
    """The header's ``elapsed`` moves within 1.5 s (while the campaign runs); the job pane
    shows the running cell's own clock, ``cell m:ss``."""
    first = w.wait(elapsed, "the elapsed clock")
    then, start = elapsed(first), time.monotonic()
    while time.monotonic() - start < 1.5 and elapsed(screen := w.screen()) in (then, None):
        time.sleep(0.1)
    assert "finished" not in header(screen), \
        f"the campaign ended before the clock check could see it run:\n{screen}"
    assert elapsed(screen) not in (then, None), f"elapsed {then} did not move in 1.5 s:\n{screen}"
    if w.size[0] >= 160:
        w.check("· elapsed " in header(screen), "the header's clock without its label", screen)
    # compact panes (80×24) have no left border; the line may drop ' · attempt 1' to fit
    w.wait(lambda s: re.search(rf"(?:│|^)\[\d/{CELLS}\] D_ens .*· cell \d+:\d\d", s, re.M),
           "the job pane's cell clock", timeout=CAMPAIGN_S)


#: A speedup on the strip at most this long after its cell ended (the issue's bound, 5 s,
#: is the bench's, on a quiet host; this is an end-to-end check on a loaded one).
SO_FAR_S = 15.0


def item2_4_strip_updates_and_names_the_k(w: Walk) -> None:
    """The strip is updated at the cell ends: each unified_model cell's speedup shows
    within :data:`SO_FAR_S` of that cell's end (the runner's ``done`` event); after the
    end each speedup it shows names its K, and at 160 columns both show."""
    done = w.wait(f"cells {CELLS}/{CELLS}: {CELLS} done · finished (done, ok)",
                  "the campaign to finish", timeout=CAMPAIGN_S)
    screen = w.wait(lambda s: speedups_known(s) == 2, "the strip's two speedups",
                    timeout=SO_FAR_S)
    events = [json.loads(line) for line in
              (w.workdir / "runs" / "walk" / "runner.jsonl").read_text().splitlines()]
    labels = {e["cell"]: e["label"] for e in events if e["type"] == "queued"}
    ends = {labels[e["cell"]]: e["ts"] for e in events if e["type"] == "done"}
    for known, label in ((1, "D_ens unified_model K=1 pass 1"),
                         (2, "D_ens unified_model K=2 pass 1")):
        shown = next(t for t, s in w.history if speedups_known(s) >= known)
        late = shown - ends[label]
        w.timings[f"speedup {known} shown after its cell end (s)"] = late
        assert late <= SO_FAR_S, f"{label}: its speedup showed {late:.1f} s after its end"
    items = strip_items(screen)
    w.check(items, "the strip shows no speedup after the campaign ended", screen)
    w.check(all(re.search(r"(^|so far: )D_ens unified_model K=[12] ", i.strip())
                for i in items), f"a speedup without its K: {items}", screen)
    if w.size[0] >= 160:
        w.check(len(items) == 2, "160 columns: not every speedup shows", screen)
    assert done


def item1_the_campaign_that_ran_has_the_typed_values(w: Walk) -> None:
    """The campaign the runner ran (its copy in the run folder) has item 1's digits where
    they were typed."""
    ran = (w.workdir / "runs" / "walk" / "campaign.toml").read_text().splitlines()
    for line in ('name = "walk"', "passes = 1", "seed = 7", "retries = 2"):
        assert line in ran, ran


ZOOMS = ("zoomed: cells", "zoomed: jobs", "zoomed: monitor", "zoomed: log", "zoomed: events",
         "every pane (z: zoom)")


def item6_j_and_k_after_the_zoom_cycle(w: Walk) -> None:
    """``z`` through every zoom and back; then k and j move the cell cursor (the job pane
    shows the cell under it) without a Tab."""
    for zoom in ZOOMS:
        w.keys("z")
        w.wait(zoom, f"z to show {zoom!r}")
    screen = w.wait(lambda s: re.search(r"(?:│|^) #  (?:experiment|exp) ", s, re.M)
                    and selected_cell(s), "every pane")
    row = selected_cell(screen)
    up = row - 1 if row > 1 else row + 1
    w.keys("k" if row > 1 else "j")
    w.wait(lambda s: selected_cell(s) == up, f"the cursor to move to cell {up}")
    w.keys("j" if row > 1 else "k")
    w.wait(lambda s: selected_cell(s) == row, f"the cursor to move back to cell {row}")


def one_line_header(screen: str) -> bool:
    """The campaign line is one line: the strip under it (none while nothing is known),
    then the first pane's top edge (a wrapped header pushed ``runner pid …`` and the ETA onto
    more lines, hiding cell rows)."""
    lines = screen.splitlines()
    title = next((i for i, line in enumerate(lines[:5])
                  if re.match(r"[╭─]", line)), None)  # a zoom: another pane, or untitled
    if title is None or re.search(r"· cells \d+/\d+: ", header(screen)) is None:
        return False
    # between the campaign line and the first pane: at most the strip, then the host bar
    # (``host CPU 3% · mem …``, narrower ``C3% M6%``), each one line
    between = lines[1:title]
    strips = [ln for ln in between if re.search(r"so far|ETA", ln)]
    hosts = [ln for ln in between if re.match(r" *(?:host )?C(?:PU )?\d+%", ln)]
    return len(strips) <= 1 and len(hosts) <= 1 and len(strips) + len(hosts) == len(between)


def item5_resize_keeps_the_layout(w: Walk) -> None:
    """Every run screen captured so far had a one-line campaign line; then a resize to the
    other size and back: the line stays one line, the strip's speedups are whole items
    (each names its K), the footer ends at ``^p palette`` with nothing after it."""
    ran = [s for _, s in w.history if "· cells " in header(s)]
    wrapped = [s for s in ran if not one_line_header(s)]
    w.check(not wrapped, "the campaign line took more than one line",
            wrapped[0] if wrapped else "")
    other = (80, 24) if w.size[0] >= 160 else (160, 48)
    for width, height in (other, w.size):
        w.tmux("resize-window", "-t", "dash", "-x", str(width), "-y", str(height))
        screen = w.wait(lambda s, n=width: max(map(len, s.splitlines())) == n
                        and one_line_header(s) and footer(s).rstrip().endswith("^p palette"),
                        f"the screen at {width}×{height}: one campaign line, the footer "
                        "ending at ^p palette")
        items = strip_items(screen)
        w.check(items and all(re.search(r"D_ens unified_model K=[12] \d+\.\d+×", i)
                              for i in items), f"{width}×{height}: cut strip items {items}",
                screen)


#: The run screen's steps, in order (then quit).
RUN_STEPS: list[Callable[[Walk], None]] = [
    item8_clocks_tick,
    item2_4_strip_updates_and_names_the_k,
    item1_the_campaign_that_ran_has_the_typed_values,
    item6_j_and_k_after_the_zoom_cycle,
    item5_resize_keeps_the_layout,
]


def quit_cleanly(w: Walk) -> None:
    """``q`` on the ended campaign: the dashboard exits 0; neither it, nor the runner, nor
    anything they started is left."""
    started = json.loads((w.workdir / "runs" / "walk" / "runner.jsonl").open().readline())
    w.keys("q")
    w.wait("EXITED 0", "the dashboard to exit 0", timeout=UI_S)
    deadline = time.monotonic() + 30
    while True:
        left = [p for p in psutil.process_iter(["pid", "name"]) if _marked(p, w.marker)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"processes left: {[(p.pid, p.info['name']) for p in left]}"
    for pid in (w.dashboard_pid, started["runner_pid"], started.get("guard_pid", 0)):
        assert not _alive(pid), pid


def _marked(process: psutil.Process, marker: str) -> bool:
    try:
        return process.environ().get("FUGUE_WALK") == marker
    except (psutil.Error, OSError):
        return False


def _kill_marked(marker: str) -> None:
    for process in psutil.process_iter():
        if _marked(process, marker):
            try:
                process.kill()
            except psutil.Error:
                pass


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ------------------------------------------------------------------ the test
def _start(tmp_path: Path, data_dir: Path, size: tuple[int, int]) -> Walk:
    (tmp_path / "experiments.toml").write_text(EXPERIMENTS)
    (tmp_path / "walk.toml").write_text(CAMPAIGN)
    walk = Walk(socket=f"fugue-walk-{os.getpid()}-{size[0]}", size=size, workdir=tmp_path,
                marker=f"{os.getpid()}-{size[0]}x{size[1]}")
    env = {"FUGUE_DATA_DIR": str(data_dir), "FUGUE_CONFIG_DIR": str(tmp_path / "config"),
           "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "FUGUE_PLUGINS": "",
           "NO_COLOR": "1", "FUGUE_WALK": walk.marker}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # `env` gives the variables to the dashboard alone: the shell and its sleep (which
    # keeps the pane, and the exit status, on the screen) carry no marker.
    command = (f"cd {shlex.quote(str(tmp_path))} && env {exports} {shlex.quote(sys.executable)}"
               f" -m fugue_tui dashboard walk.toml; echo EXITED $?; sleep 600")
    walk.tmux("new-session", "-d", "-s", "dash", "-x", str(size[0]), "-y", str(size[1]),
              command)
    return walk


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the real-terminal "
                    "walk-through needs it (apt-get install tmux)")
@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])
def test_dashboard_walkthrough_keyboard_only(tmp_path, data_dir, size):
    w = _start(tmp_path, data_dir, size)
    began = time.monotonic()
    try:
        first = w.wait(f"{CELLS} cells: {CELLS} run", "the plan's preview", timeout=START_S)
        assert max(map(len, first.splitlines())) == size[0], first
        pane = int(w.tmux("display", "-p", "-t", "dash", "#{pane_pid}").strip())
        w.dashboard_pid = next(p.pid for p in psutil.Process(pane).children()
                               if _marked(p, w.marker))
        for step in [*PLAN_STEPS, launch, *RUN_STEPS, quit_cleanly]:
            t0 = time.monotonic()
            step(w)
            w.timings[step.__name__] = time.monotonic() - t0
        assert not w.defects, "\n\n".join(w.defects)
    finally:
        socket = w.tmux("display", "-p", "#{socket_path}").strip()
        subprocess.run([TMUX, "-L", w.socket, "kill-server"], capture_output=True)
        Path(socket).unlink(missing_ok=True)  # tmux leaves it behind
        _kill_marked(w.marker)  # after a failure: a runner or cell still going
        total = time.monotonic() - began
        print(f"\n{size[0]}x{size[1]}: {total:.1f} s; "
              + ", ".join(f"{k} {v:.1f}" for k, v in w.timings.items())
              + f"; load {os.getloadavg()[0]:.1f}")
