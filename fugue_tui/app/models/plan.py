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

import contextlib
import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import tomli_w

from engine.define import tomlfile
from engine.define.campaign import Campaign, parse_campaign
from engine.define.campaign_schema import default as campaign_default
from engine.errors import ConfigError, FugueError, OutputError, ProblemList
from engine.plugins import load_plugins

# Re-exported (``as``): an executor option's text was parsed here before it had a module of
# its own, and callers still import it from the plan.
from fugue_tui.app.models.option_text import format_option as format_option
from fugue_tui.app.models.option_text import parse_option as parse_option

if TYPE_CHECKING:  # the runner's supervisor loads when a preview is computed
    from engine.runner.supervisor import PlannedCell

#: A plan: the campaign table a campaign TOML file parses to, unset keys left out or None.
PlanDoc: TypeAlias = dict[str, Any]

#: Where validation errors of an unsaved plan say they come from.
PLAN_WHERE = "dashboard plan"
#: The dashboard's watchdog action unless the campaign says otherwise: flag hung cells and
#: let the user decide (kill and retry, kill and skip) from the keyboard.
DEFAULT_WATCHDOG_ACTION = "flag"


def default_doc(runs_dir: str = "runs") -> PlanDoc:
    """A new plan: nothing selected, the declared defaults (seq, one pass, seed 42, ...:
    ``engine.define.campaign_schema``) but one torch thread per cell, and a watchdog that
    flags a hung cell."""
    return {"name": "dashboard", "experiments": [],
            **{key: campaign_default(key) for key in ("executors", "passes", "seed",
                                                       "retries", "device", "compile",
                                                       "compile_mode")},
            "threads": 1, "runs_dir": runs_dir,
            "watchdog": {"action": DEFAULT_WATCHDOG_ACTION}}


def clean_doc(doc: PlanDoc) -> PlanDoc:
    """``doc`` without unset values (None, "" and empty tables), as a campaign file holds it."""
    out: PlanDoc = {}
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

    cells: list[PlannedCell] = field(default_factory=list)
    campaign: Campaign | None = None
    error: str = ""
    warnings: list[str] = field(default_factory=list)
    #: A stream campaign's stream in one line (:func:`describe_stream`), ``""`` for others.
    stream: str = ""

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


def parse_plan(doc: PlanDoc, where: str = PLAN_WHERE) -> Campaign:
    """Validate a plan as a campaign (errors: :func:`engine.define.campaign.parse_campaign`)."""
    load_plugins()  # idempotent: the names a plan may use, before it is validated
    return parse_campaign(_stream_cleaned(clean_doc(doc)), where)


def _stream_cleaned(doc: PlanDoc) -> PlanDoc:
    """A stream plan (``arrivals``, issue 51) without the empty ``experiments`` list the
    plan screen keeps for its catalogue: a stream names its experiments in its mix or trace,
    and the campaign refuses both keys (a non-empty selection still is refused, as by
    ``--batch``)."""
    if "arrivals" in doc and not doc.get("experiments"):
        doc = {k: v for k, v in doc.items() if k != "experiments"}
    return doc


def is_stream(doc: PlanDoc) -> bool:
    """Whether a plan is a stream campaign (it has an ``arrivals`` table or value)."""
    return doc.get("arrivals") not in (None, "", {})


def describe_stream(campaign: Campaign) -> str:
    """One line for a stream campaign's preview: its process and what drives it
    (``"stream: poisson, 2.0 jobs/s, 6 jobs, seed 42, mix D_ens 0.5, D_reg 0.5"`` or
    ``"stream: trace /x/t.csv, 6 jobs"``); ``""`` for a campaign without a stream
    (:func:`engine.define.arrivals.describe`, as ``--batch --dry-run`` prints it)."""
    from engine.define.arrivals import describe

    spec = getattr(campaign, "arrivals", None)
    return "" if spec is None else describe(spec, campaign.seed)


def stream_templates(campaign: Campaign | None) -> dict[str, str]:
    """A stream campaign's templates and what each is of its stream, for the catalogue:
    ``{"D_ens": "75 %", "D_reg": "25 %"}`` (a Poisson mix's weights as shares) or
    ``{"D_ens": "3 jobs"}`` (a trace's rows); ``{}`` without a stream."""
    spec = getattr(campaign, "arrivals", None)
    if spec is None:
        return {}
    if spec.process == "trace":
        counts: dict[str, int] = {}
        for _, exp, _ in spec.rows:
            counts[exp] = counts.get(exp, 0) + 1
        return {exp: f"{n} job{'s' if n != 1 else ''}" for exp, n in counts.items()}
    total = sum(weight for _, weight in spec.mix) or 1.0
    return {exp: f"{100 * weight / total:.0f} %" for exp, weight in spec.mix}


def preview(doc: PlanDoc, resume: bool = False, where: str = PLAN_WHERE) -> Preview:
    """The cells a plan would run and what the runner would skip (``resume``: cells with an
    ``ok`` row already). Spends nothing; never raises for bad input (see ``error``)."""
    from engine.runner.supervisor import Runner

    if not doc.get("experiments") and not is_stream(doc):
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
                   warnings=[*(getattr(campaign, "warnings", []) or []), *notes],
                   stream=describe_stream(campaign))


def save_plan(doc: PlanDoc, path: str | Path) -> Path:
    """Write the plan as a campaign TOML file (tomli-w); ``experiments_file`` and a stream's
    ``arrivals.trace`` are rewritten relative to the file's folder. Returns the path.

    Raises:
        OutputError: the file cannot be written (names the file and the reason).
    """
    path = Path(path)
    out = _stream_cleaned(clean_doc(copy.deepcopy(doc)))
    extra = out.get("experiments_file")
    if extra:
        absolute = Path(extra).resolve()
        try:
            out["experiments_file"] = os.path.relpath(absolute, path.resolve().parent)
        except ValueError:  # another drive: keep it absolute
            out["experiments_file"] = str(absolute)
    arrivals = out.get("arrivals")
    if isinstance(arrivals, dict) and isinstance(arrivals.get("trace"), str):
        # a stream's trace (issue 51), as experiments_file: relative to the file's folder
        with contextlib.suppress(ValueError):
            out["arrivals"] = {**arrivals, "trace": os.path.relpath(
                Path(arrivals["trace"]).resolve(), path.resolve().parent)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(tomli_w.dumps(out))
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the campaign: {exc.strerror or exc}") from None
    return path


def default_save_path(doc: PlanDoc) -> Path:
    """Where ``ctrl+s`` proposes to save a plan never saved or loaded: ``<name>.toml`` in
    the folder that holds the plan's runs folder (``runs`` → the working directory), in
    its ``campaigns/`` subfolder when there is one already (this repository's layout). A
    folder is never proposed that would have to be created; the user types another path
    for that, and is asked (:meth:`PlanScreen._save_to`)."""
    runs = Path(str(doc.get("runs_dir") or "runs")).expanduser()
    base = runs.parent
    name = f"{doc.get('name') or 'campaign'}.toml"
    return base / "campaigns" / name if (base / "campaigns").is_dir() else base / name


def load_plan(path: str | Path) -> PlanDoc:
    """Read a campaign TOML file into a plan and validate it.

    The watchdog action defaults to :data:`DEFAULT_WATCHDOG_ACTION` when the file does not
    set one; ``experiments_file`` and a stream's ``arrivals.trace`` become absolute.

    Raises:
        ConfigError: unreadable or malformed TOML (file, line, column), an unknown key,
            experiment or executor, a wrong value (file and key).
    """
    path = Path(path)
    doc = tomlfile.load(path)
    extra = doc.get("experiments_file")
    if isinstance(extra, str) and extra and not Path(extra).is_absolute():
        # A NUL byte makes resolve() raise ValueError: leave the text as written, and the
        # campaign check below names it in one line (the path text rule).
        with contextlib.suppress(ValueError, OSError):
            doc["experiments_file"] = str((path.parent / extra).resolve())
    arrivals = doc.get("arrivals")
    trace = arrivals.get("trace") if isinstance(arrivals, dict) else None
    if (isinstance(arrivals, dict) and isinstance(trace, str) and trace
            and not Path(trace).expanduser().is_absolute()):
        # a stream's trace (issue 51), like experiments_file: relative to the file
        with contextlib.suppress(ValueError, OSError):
            doc["arrivals"] = {**arrivals, "trace": str((path.parent / trace).resolve())}
    load_plugins()
    try:
        parse_campaign(clean_doc(doc), str(path))  # raises, naming the file and key
    except ConfigError as exc:
        raise ProblemList(located_problems(path, doc, str(exc))) from None
    if not isinstance(doc.get("experiments"), list) and "arrivals" not in doc:
        # (a stream campaign names none: its experiments are its stream's templates)
        campaign = parse_campaign(clean_doc(doc), str(path))
        doc["experiments"] = list(campaign.experiments)
    watchdog = dict(doc.get("watchdog") or {})
    watchdog.setdefault("action", DEFAULT_WATCHDOG_ACTION)
    doc["watchdog"] = watchdog
    doc.setdefault("name", path.stem)
    return doc


def located_problems(path: Path, doc: PlanDoc, first: str) -> list[str]:
    """Every problem of a campaign file at once, one line each (a list), each as
    ``<file>:<line>: <problem>`` where the line is known, under a ``<file>: N problems:``
    header when there are several.

    The validation stops at its first error; a user fixing a file wants them all, and
    where. So: every unknown key and wrong type first (:func:`tomlfile.key_problems`), then
    the value problems (an unknown executor or experiment, a count out of range, a bad
    option …) found by validating again and again a copy of the file with each problem
    already reported set aside (:func:`_value_problems`). ``first``, the validation's own
    error, is always among them."""
    from engine.define.campaign_schema import TABLES, key_types

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    lines = tomlfile.key_lines(text)
    # a table's own header (`[options.zzz]`) is where a problem of the whole table is
    headers = {match.group(1).strip(): number for number, line in
               enumerate(text.splitlines(), start=1)
               if (match := re.match(r"^\s*\[\s*([^\[\]]+?)\s*\]", line))}

    renamed: dict[str, str] = {}  # the key meant -> the misspelt key the file has

    def at(table: str, key: str) -> str:
        key = renamed.get(key, key) if not table else key
        line = lines.get((table, key)) or headers.get(f"{table}.{key}" if table else key)
        return f"{path}:{line}" if line else str(path)

    found: list[tuple[str, str]] = []
    repaired = copy.deepcopy(doc)
    for key, problem in tomlfile.key_problems(doc, key_types()):
        found.append((at("", key), problem))
        value = repaired.pop(key, None)
        # `experiment = …` for `experiments`: its value is still checked under the key
        # meant, so a typo in the key does not hide an unknown experiment in its value.
        meant = re.search(r"did you mean '([A-Za-z0-9_]+)'", problem)
        if meant and meant.group(1) not in doc and problem.startswith("unknown key"):
            repaired[meant.group(1)] = value
            renamed[meant.group(1)] = key
    for table, allowed in ((t, key_types(t)) for t in TABLES):
        sub = doc.get(table)
        if isinstance(sub, dict):
            for key, problem in tomlfile.key_problems(sub, allowed):
                found.append((at(table, key), f"{table}: {problem}"))
                repaired[table].pop(key, None)
    found += _value_problems(path, repaired, at)
    # in the file's order (a problem without a line last), as an editor would walk them
    found.sort(key=lambda item: int(item[0].rpartition(":")[2])
               if item[0].rpartition(":")[2].isdigit() else 1 << 30)
    messages = [f"{where}: {problem}" for where, problem in found]
    # a list of the valid names ("; known: mp, ray, seq, …") once per list: repeated under
    # each unknown executor it made a 9-problem file too long for an 80x24 screen
    seen_lists: set[str] = set()
    for i, message in enumerate(messages):
        tail = re.search(r"; known: .*$", message)
        if tail and tail.group(0) in seen_lists:
            messages[i] = message[:tail.start()]
        elif tail:
            seen_lists.add(tail.group(0))
    rest = first.removeprefix(f"{path}: ")
    if not any(problem.endswith(rest) or rest.endswith(problem) for _, problem in found):
        named = re.search(r"key '([A-Za-z0-9_]+)'", rest)
        table = "watchdog" if rest.startswith("watchdog") else ""
        where = at(table, named.group(1)) if named else str(path)
        messages.insert(0, f"{where}: {rest}" if rest != first else first)
    if len(messages) > 1:
        messages.insert(0, f"{path}: {len(messages)} problems:")
    return messages


#: How many times a file is validated again to find its next value problem: more than a
#: campaign file has keys, so only a repair that does not take (a bug) stops it early.
_MAX_ROUNDS = 40
_UNKNOWN_EXECUTOR = re.compile(r"^unknown executor '([^']*)'")
_UNKNOWN_EXPERIMENT = re.compile(r"^experiments: unknown experiment '([^']*)'")
_OPTION = re.compile(r"^options\.([A-Za-z0-9_-]+)(?:: (?:unknown )?key '([A-Za-z0-9_]+)'|: unknown "
                     r"executor| must)")
_TABLE_KEY = re.compile(r"^(watchdog|budget): (?:.*?key '([A-Za-z0-9_]+)'|need 1 <= suspect_after)")
_KEY = re.compile(r"key '([A-Za-z0-9_]+)'")


def _value_problems(path: Path, doc: PlanDoc, at) -> list[tuple[str, str]]:
    """The value problems of a campaign table whose key and type problems are already set
    aside: validate, note the error with its line, set the value it names aside (an
    unknown executor or experiment leaves its list, a bad key goes back to its default),
    validate again — until it passes or an error names nothing that can be set aside.

    An experiment list emptied this way is validated with one stand-in experiment (so the
    checks after the selection still run); errors naming the stand-in are not reported."""
    from engine.define.campaign import parse_campaign
    from engine.define.catalogue import load_catalogue

    found: list[tuple[str, str]] = []
    stand_in = ""
    for _ in range(_MAX_ROUNDS):
        try:
            parse_campaign(clean_doc(doc), str(path))
            return found
        except ConfigError as exc:
            message = str(exc).removeprefix(f"{path}: ")
        except FugueError:
            return found
        if stand_in and f"'{stand_in}'" in message:
            return found
        if any(message == problem for _, problem in found):
            return found  # a repair that did not take: stop rather than loop
        unknown = _UNKNOWN_EXECUTOR.match(message)
        experiment = _UNKNOWN_EXPERIMENT.match(message)
        option = _OPTION.match(message)
        table = _TABLE_KEY.match(message)
        if unknown:
            found.append((at("", "executors"), message))
            names = doc.get("executors")
            names = [names] if isinstance(names, str) else list(names or [])
            doc["executors"] = ([n for n in names if str(n) != unknown.group(1)]
                                or campaign_default("executors"))
        elif experiment:
            found.append((at("", "experiments"), message))
            doc["experiments"] = _without_experiment(doc.get("experiments"), experiment.group(1))
            if not doc["experiments"]:
                try:
                    stand_in = load_catalogue(doc.get("experiments_file") or None).ids()[0]
                except FugueError:
                    return found
                doc["experiments"] = [stand_in]
        elif option:
            executor, key = option.groups()
            found.append((at(f"options.{executor}", key) if key else at("options", executor),
                          message))
            options = doc.get("options") or {}
            if key and isinstance(options.get(executor), dict):
                options[executor].pop(key, None)
            else:
                options.pop(executor, None)
        elif table:
            name, key = table.groups()
            found.append((at(name, key or "suspect_after"), message))
            for gone in ([key] if key else ["suspect_after", "hung_after"]):
                (doc.get(name) or {}).pop(gone, None)
        else:
            key = _KEY.search(message)
            found.append((at("", key.group(1)) if key else str(path), message))
            if not key or key.group(1) not in doc:
                return found
            doc.pop(key.group(1))
    return found


def _without_experiment(selector: Any, token: str) -> list[str]:
    """An ``experiments`` selector (a string, a list, comma lists) without ``token``."""
    items = selector if isinstance(selector, list) else [selector]
    parts = [p.strip() for item in items if isinstance(item, (str, int))
             for p in str(item).split(",") if p.strip()]
    return [p for p in parts if p != token and not (p.isdigit() and f"E{int(p):02d}" == token)]


def cell_keys(doc: PlanDoc) -> list[str]:
    """The cell keys of a plan, in order (raises like :func:`parse_plan`)."""
    from engine.runner.supervisor import Runner

    return [p.cell.key for p in Runner(parse_plan(doc)).plan()]
