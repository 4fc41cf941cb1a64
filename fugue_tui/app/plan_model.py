"""The plan screen's model: a campaign as a TOML document, its preview and its file.

Textual-free and torch-free. The plan is kept as the campaign table itself (the dict a
campaign TOML file parses to), so what the dashboard saves, loads, previews and launches is
exactly what ``fugue-tui --batch`` would read; validation is :func:`engine.define.campaign.parse_campaign`
and the preview is the runner's own dry run (:meth:`engine.runner.supervisor.Runner.plan`).

In memory a plan's ``experiments_file`` is absolute (or relative to the working directory);
on saving it is written relative to the saved file's folder, where
:func:`engine.define.campaign.load_campaign` resolves it, so saving and loading give the same cells
and keys.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from engine.define import tomlfile
from engine.define.campaign import Campaign, parse_campaign
from engine.errors import ConfigError, FugueError, OutputError
from engine.plugins import load_plugins

#: Where validation errors of an unsaved plan say they come from.
PLAN_WHERE = "dashboard plan"
#: The dashboard's watchdog action unless the campaign says otherwise: flag hung cells and
#: let the user decide (kill and retry, kill and skip) from the keyboard.
DEFAULT_WATCHDOG_ACTION = "flag"


def default_doc(runs_dir: str = "runs") -> dict[str, Any]:
    """A new plan: nothing selected, seq, one pass, one torch thread per cell."""
    return {"name": "dashboard", "experiments": [], "executors": ["seq"], "passes": 1,
            "seed": 42, "retries": 0, "device": "auto", "compile": "off",
            "compile_mode": "default", "threads": 1, "runs_dir": runs_dir,
            "watchdog": {"action": DEFAULT_WATCHDOG_ACTION}}


def clean_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without unset values (None, "" and empty tables), as a campaign file holds it."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            value = clean_doc(value)
            if not value:
                continue
        elif value is None or value == "":
            continue
        out[key] = value
    return out


@dataclass
class Preview:
    """The runner's dry run of a plan: every cell with why it would not run, or the error
    that stops the plan (one line naming the key)."""

    cells: list[Any] = field(default_factory=list)       # engine.runner.supervisor.PlannedCell
    campaign: Campaign | None = None
    error: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(1 for p in self.cells if not p.skip)

    @property
    def skips(self) -> int:
        return sum(1 for p in self.cells if p.skip)

    def summary(self) -> str:
        """``"12 cells: 10 run, 2 skipped"`` or the error."""
        if self.error:
            return self.error
        if not self.cells:
            return "no cells"
        return f"{len(self.cells)} cells: {self.runs} run, {self.skips} skipped"


def parse_plan(doc: dict[str, Any], where: str = PLAN_WHERE) -> Campaign:
    """Validate a plan as a campaign (errors: :func:`engine.define.campaign.parse_campaign`)."""
    load_plugins()  # idempotent: the names a plan may use, before it is validated
    return parse_campaign(clean_doc(doc), where)


def preview(doc: dict[str, Any], resume: bool = False, where: str = PLAN_WHERE) -> Preview:
    """The cells a plan would run and what the runner would skip (``resume``: cells with an
    ``ok`` row already). Spends nothing; never raises for bad input (see ``error``)."""
    from engine.runner.supervisor import Runner

    if not doc.get("experiments"):
        return Preview(error="select at least one experiment")
    try:
        campaign = parse_plan(doc, where)
        planned = Runner(campaign, resume=resume).plan()
    except FugueError as exc:
        return Preview(error=str(exc))
    # The campaign's warnings, then how max_parallel = "auto" was resolved where it needs
    # saying (no profile: every job at once), each line once, as --batch prints them.
    notes = dict.fromkeys(n for p in planned for n in getattr(p.cell, "notes", []))
    return Preview(planned, campaign,
                   warnings=[*(getattr(campaign, "warnings", []) or []), *notes])


def save_plan(doc: dict[str, Any], path: str | Path) -> Path:
    """Write the plan as a campaign TOML file (tomli-w); ``experiments_file`` is rewritten
    relative to the file's folder. Returns the path.

    Raises:
        OutputError: the file cannot be written (names the file and the reason).
    """
    path = Path(path)
    out = clean_doc(copy.deepcopy(doc))
    extra = out.get("experiments_file")
    if extra:
        absolute = Path(extra).resolve()
        try:
            out["experiments_file"] = os.path.relpath(absolute, path.resolve().parent)
        except ValueError:  # another drive: keep it absolute
            out["experiments_file"] = str(absolute)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(tomli_w.dumps(out))
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the campaign: {exc.strerror or exc}") from None
    return path


def load_plan(path: str | Path) -> dict[str, Any]:
    """Read a campaign TOML file into a plan and validate it.

    The watchdog action defaults to :data:`DEFAULT_WATCHDOG_ACTION` when the file does not
    set one; ``experiments_file`` becomes absolute.

    Raises:
        ConfigError: unreadable or malformed TOML (file, line, column), an unknown key,
            experiment or executor, a wrong value (file and key).
    """
    path = Path(path)
    doc = tomlfile.load(path)
    extra = doc.get("experiments_file")
    if isinstance(extra, str) and extra and not Path(extra).is_absolute():
        doc["experiments_file"] = str((path.parent / extra).resolve())
    load_plugins()
    try:
        parse_campaign(clean_doc(doc), str(path))  # raises, naming the file and key
    except ConfigError as exc:
        raise ConfigError(located_problems(path, doc, str(exc))) from None
    if not isinstance(doc.get("experiments"), list):
        campaign = parse_campaign(clean_doc(doc), str(path))
        doc["experiments"] = list(campaign.experiments)
    watchdog = dict(doc.get("watchdog") or {})
    watchdog.setdefault("action", DEFAULT_WATCHDOG_ACTION)
    doc["watchdog"] = watchdog
    doc.setdefault("name", path.stem)
    return doc


def located_problems(path: Path, doc: dict[str, Any], first: str) -> str:
    """Every unknown key and wrong type of a campaign file, one per line, each as
    ``<file>:<line>: key 'x' must be …`` (the validation stops at the first; a user fixing a
    file wants them all, and where). ``first``, the validation's own error, is kept — with
    its line when it names a key of the file — when it is not one of them."""
    from engine.define.campaign import _KEYS, _WATCHDOG_KEYS

    try:
        lines = tomlfile.key_lines(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        lines = {}

    def at(table: str, key: str) -> str:
        line = lines.get((table, key))
        return f"{path}:{line}" if line else str(path)

    found = [(at("", key), problem) for key, problem in tomlfile.key_problems(doc, _KEYS)]
    watchdog = doc.get("watchdog")
    if isinstance(watchdog, dict):
        found += [(at("watchdog", key), f"watchdog: {problem}")
                  for key, problem in tomlfile.key_problems(watchdog, _WATCHDOG_KEYS)]
    messages = [f"{where}: {problem}" for where, problem in found]
    rest = first.removeprefix(f"{path}: ")
    if not any(rest.endswith(problem) for _, problem in found):
        named = re.search(r"key '([A-Za-z0-9_]+)'", rest)
        table = "watchdog" if rest.startswith("watchdog") else ""
        where = at(table, named.group(1)) if named else str(path)
        messages.insert(0, f"{where}: {rest}" if rest != first else first)
    if len(messages) > 1:
        messages.insert(0, f"{path}: {len(messages)} problems:")
    return "\n".join(messages)


def cell_keys(doc: dict[str, Any]) -> list[str]:
    """The cell keys of a plan, in order (raises like :func:`parse_plan`)."""
    from engine.runner.supervisor import Runner

    return [p.cell.key for p in Runner(parse_plan(doc)).plan()]


def parse_option(value: str, types: tuple[type, ...], axis: bool = False) -> Any:
    """An executor option typed into the plan: ``""`` is unset (None); ints, floats and
    booleans are parsed by the option's declared types; a comma list for an axis option
    (e.g. ``asha,median``) becomes a list.

    Raises:
        ValueError: the text is not a value of the declared type.
    """
    text = value.strip()
    if not text:
        return None
    if axis and "," in text:
        return [parse_option(part, tuple(t for t in types if t is not list)) for part in
                text.split(",") if part.strip()]
    if list in types and not axis and text != "auto":
        # a list-valued option (mp's devices, issue 27): one entry or a comma list
        return [parse_option(part, tuple(t for t in types if t is not list)) for part in
                text.split(",") if part.strip()]
    if bool in types:
        if text.lower() in ("true", "yes", "on", "1"):
            return True
        if text.lower() in ("false", "no", "off", "0"):
            return False
        raise ValueError(f"expected true or false, got {text!r}")
    if int in types:
        try:
            return int(text)
        except ValueError:
            if str in types and float not in types:
                return text  # a number or a word (max_parallel: N or auto): checked later
            if float not in types:
                raise ValueError(f"expected an integer, got {text!r}") from None
    if float in types:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    return text


def format_option(value: Any) -> str:
    """The text shown for an option value (inverse of :func:`parse_option`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(format_option(v) for v in value)
    return str(value)
