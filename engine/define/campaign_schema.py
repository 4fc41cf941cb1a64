"""Campaign keys, declared once: each key of a campaign file (``campaigns/*.toml``) is one
:class:`CampaignKey` in :data:`KEYS` with its types, default, bound, choices, one-line doc,
its ``fugue-tui run`` flag (:class:`Flag`) and its field in the dashboard's plan form
(:class:`FormField`). Everything that knows the keys reads them from here:

- campaign validation (``engine.define.campaign``): the allowed keys and their types
  (:func:`key_types`, :func:`table_types`), the defaults (:func:`default`), the choices
  and bounds (:func:`check_value`);
- the :class:`~engine.define.campaign.Campaign` dataclass's and
  :class:`~engine.define.watchdog_settings.WatchdogSettings`'s defaults;
- ``fugue-tui run``'s flags and their ``--help`` (``fugue_tui.commands.run_flags``);
- the plan form's campaign fields (``fugue_tui.app.widgets.campaign_form``);
- README's table of campaign keys (:func:`markdown_table`, written by
  ``python -m engine.define.campaign_docs``, pinned by ``tests/unit/engine/define/test_campaign_schema.py``).

This is the executor options' mechanism (``engine.define.executor_options``) for the
campaign's own keys: adding a key is one entry here (and its meaning where it is used).
A key of a table (``[watchdog]``, ``[budget]``) is declared with a dotted name
(``watchdog.interval_s``); the table itself is then a key of type table.

Torch-free; imports nothing of the engine but the bounds, the precision names and errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.bounds import CAMPAIGN, DEFAULT_SEED, Bound
from engine.errors import ConfigError, nearest, quoted, shown
from engine.precision import PRECISIONS

#: ``compile``: no torch.compile, compiled, or one cell of each.
COMPILE_CHOICES = ("off", "on", "both")
#: ``compile_mode``: torch.compile's modes.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: ``[watchdog] action``: kill a hung cell (then retry it), or flag it and wait for a command.
WATCHDOG_ACTIONS = ("kill", "flag")


@dataclass(frozen=True)
class Flag:
    """A key's ``fugue-tui run`` flag.

    ``spelling`` (``--passes``; its argparse dest is ``run_`` and the spelling's words,
    ``run_passes``), ``group`` (``what``: what to run; ``how``: how and where), ``metavar``,
    ``many`` (several values, the flag repeatable: ``--exp A B --exp C``), ``const`` (the
    value of the flag given alone: ``--compile`` is ``on``), ``checked`` (argparse refuses
    a value outside the key's choices or below its bound's low end, in argparse's words;
    otherwise the campaign's check does, in its words) and ``help`` (replaces the generated
    help: the key's doc and constraint)."""

    spelling: str
    group: str
    metavar: str | None = None
    many: bool = False
    const: str | None = None
    checked: bool = False
    help: str = ""

    @property
    def dest(self) -> str:
        """``run_passes`` for ``--passes`` (``run_`` keeps it apart from the top-level
        parser's flags of the same name)."""
        return "run_" + self.spelling.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class FormField:
    """A key's field in the plan form: ``kind`` ``text`` | ``int`` | ``float`` | ``select``
    | ``list`` (a comma list of names, one cell each) | ``ints`` (a comma list of integers)
    | ``size`` (``6GiB``, ``512MiB`` or MiB) | ``devices`` (``auto``, ``cpu`` or a comma list
    of devices: ``engine.define.devices``); ``choices`` of a select or list when they are
    not the key's own (``device``: auto, cpu, cuda); ``hint``, the empty field's
    placeholder when it is not ``default <default>``; ``help`` when the key's doc is not
    the words the form shows."""

    kind: str
    choices: tuple[str, ...] = ()
    hint: str | None = None
    help: str = ""


@dataclass(frozen=True)
class CampaignKey:
    """One campaign key as every consumer sees it.

    ``name`` (``passes``; ``watchdog.interval_s`` for a table's key), ``types`` (what TOML
    may hold there: ``int`` accepts no bool, ``float`` accepts an int), ``default`` (the
    value a campaign without the key runs with; None: unset means something else, said in
    ``doc``), ``required``, ``doc`` (one line), ``bound`` (from :data:`engine.bounds.CAMPAIGN`),
    ``refusal`` (the out-of-bound message after ``"<where>: "``, a template of ``{low}``,
    ``{high}``, ``{value}``; empty: the bound's own words, ``key 'x' must be >= 0, got
    -1``), ``choices`` (the allowed strings), ``unit`` (``s``, ``checks``: shown after a
    default), ``flag`` and ``form`` (None: not a ``run`` flag / not a form field), ``rule``
    (what a check of the key's own makes of it where no bound or choices say it: a rule
    across keys, a parsed size; shown in the docs' "allowed" column)."""

    name: str
    types: tuple[type, ...]
    default: Any = None
    doc: str = ""
    required: bool = False
    bound: Bound | None = None
    refusal: str = ""
    choices: tuple[str, ...] = ()
    unit: str = ""
    flag: Flag | None = None
    form: FormField | None = None
    rule: str = ""

    @property
    def key(self) -> str:
        """The key inside its table: ``interval_s`` for ``watchdog.interval_s``."""
        return self.name.rpartition(".")[2]

    @property
    def table(self) -> str:
        """The table it belongs to: ``watchdog``; "" at the top level."""
        return self.name.rpartition(".")[0]

    @property
    def type_text(self) -> str:
        """``int``, ``str or list``, ``table``: the types as the docs name them."""
        return " or ".join("table" if t is dict else t.__name__ for t in self.types)

    @property
    def default_text(self) -> str:
        """The default as a campaign file writes it (``true``, ``0.5``, ``seq``); "" for None."""
        value = self.default
        if value is None:
            return ""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return ", ".join(map(str, value))
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)

    @property
    def allowed_text(self) -> str:
        """The choices (``off, on, both``) or the bound (``integer >= 1 and <= 1000``)."""
        if self.choices:
            return ", ".join(self.choices)
        if self.bound is not None:
            return ("integer " if self.bound.integer else "") + self.bound.text
        return self.rule

    def refuse(self, value: Any, where: str) -> None:
        """Raise :class:`ConfigError` when ``value`` is outside the key's choices or bound:
        one line, ``"<where>: key '<key>' must be one of off, on, both, got 'maybe'"``,
        ``"<where>: key 'retries' must be <= 100, got 101"`` or the key's ``refusal``."""
        if self.choices and value not in self.choices:
            raise ConfigError(f"{where}: key '{self.key}' must be one of "
                              f"{', '.join(self.choices)}, got {value!r}"
                              f"{nearest(str(value), self.choices)}")
        if self.bound is None:
            return
        if not self.refusal:
            self.bound.check(value, where, f"key '{self.key}'")
        elif self.bound.problem(value) is not None:
            raise ConfigError(f"{where}: " + self.refusal.format(
                low=_number(self.bound.low), high=_number(self.bound.high), value=value))


def _number(x: float | None) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else f"{x:g}")


_WHAT, _HOW = "what", "how"

#: Every campaign key, in the order the plan form shows its fields and ``run --help`` its
#: flags (within each group), then the docs table.
KEYS: dict[str, CampaignKey] = {k.name: k for k in (
    CampaignKey("name", (str,), doc="the run folder's name, <runs_dir>/<name> (unset: the "
                                    "campaign file's name)",
                form=FormField("text", hint="e.g. tiny2 (its run folder's name)",
                               help="run folder <runs_dir>/<name>")),
    CampaignKey("experiments", (str, list, int), required=True,
                doc="catalogue experiments: E01, 1, E08:E10, E08:, :E05, 1,4,5 or all, or a "
                    "list",
                flag=Flag("--exp", _WHAT, "SELECTOR", many=True,
                          help="catalogue experiments: E01, 1, E08:E10, E08:, :E05, 1,4,5 or "
                               "all (several allowed)")),
    CampaignKey("executors", (list, str), ("seq",), doc="the executors (one name or a list)",
                flag=Flag("--exec", _WHAT, "EXECUTOR", many=True,
                          help="executors (several allowed; default seq): see below")),
    CampaignKey("passes", (int,), 1, "repeats of the whole matrix", bound=CAMPAIGN["passes"],
                refusal="key 'passes' must be between {low} and {high}, got {value}",
                flag=Flag("--passes", _WHAT, "N", checked=True), form=FormField("int")),
    CampaignKey("seed", (int,), DEFAULT_SEED, "job i gets seed + i", bound=CAMPAIGN["seed"],
                flag=Flag("--seed", _HOW, "N"), form=FormField("int")),
    CampaignKey("retries", (int,), 0, "automatic retries of a failed or hung cell",
                bound=CAMPAIGN["retries"], flag=Flag("--retries", _HOW, "N", checked=True),
                form=FormField("int")),
    CampaignKey("threads", (int,), 0, "torch threads per cell process; 0 = all cores",
                bound=CAMPAIGN["threads"], flag=Flag("--threads", _HOW, "N", checked=True),
                form=FormField("int", hint="e.g. 1 (0 = all cores)")),
    CampaignKey("device", (str,), "auto", "where cells run: auto, cpu, cuda or cuda:N",
                flag=Flag("--device", _HOW, "DEVICE"),
                form=FormField("select", ("auto", "cpu", "cuda"))),
    CampaignKey("devices", (str, list),
                doc="several devices, one cell on each at once: auto (every visible GPU), "
                    "cpu, or a list of cuda:N / GPU-… / MIG-… UUIDs (not with device)",
                flag=Flag("--devices", _HOW, "LIST",
                          help="several devices, one cell on each at once: auto (every "
                               "visible GPU), cpu, or a comma list of cuda:N / GPU-… / MIG-… "
                               "UUIDs"),
                form=FormField("devices", hint="e.g. cuda:0,cuda:1 or auto (unset: device)",
                               help="several devices, one cell on each at once: auto (every "
                                    "visible GPU), cpu, or a comma list of cuda:N / GPU-… / "
                                    "MIG-… UUIDs (replaces device)")),
    CampaignKey("one_cell_per_host", (bool,), False,
                "with devices: one cell at a time on the host anyway"),
    CampaignKey("compile", (str,), "off", "torch.compile: off, on or both (one cell each)",
                choices=COMPILE_CHOICES,
                flag=Flag("--compile", _WHAT, const="on", checked=True,
                          help="torch.compile: off (default), on (the flag alone), or both"),
                form=FormField("select", help="torch.compile: off, on or both")),
    CampaignKey("compile_mode", (str,), "default", "torch.compile mode when compile is on",
                choices=COMPILE_MODES, flag=Flag("--compile-mode", _WHAT, "MODE"),
                form=FormField("select", hint="default: torch's default mode")),
    CampaignKey("precision", (str, list),
                doc="numeric precision: fp32, tf32, amp-fp16, amp-bf16, bf16; a list runs "
                    "one cell each (unset: each experiment's)",
                flag=Flag("--precision", _WHAT, "PRECISION", many=True,
                          help="numeric precision: fp32, tf32, amp-fp16, amp-bf16, bf16; "
                               "several (or a comma list) run one cell each (default: each "
                               "experiment's)"),
                form=FormField("list", PRECISIONS,
                               hint="e.g. fp32 or fp32,amp-bf16 (unset: each experiment's)",
                               help=f"{', '.join(PRECISIONS)}: one, or a comma list (one "
                                    "cell each)")),
    CampaignKey("amp", (bool,), doc='the legacy form of precision: true is "amp-fp16"'),
    CampaignKey("k_sweep", (list,),
                doc="ensembles only: run each at these sizes K (increasing), one cell per K "
                    "per executor",
                flag=Flag("--k-sweep", _WHAT, "K1,K2,...",
                          help="ensembles only: run each at these sizes K (increasing, e.g. "
                               "1,2,4,8,16), one cell per K per executor; `report --advise` "
                               "finds the knee (campaign key k_sweep)"),
                form=FormField("ints", hint="e.g. 1,2,4,8 (ensembles)",
                               help="ensemble sizes to sweep, e.g. 1,2,4,8 (one cell per K; "
                                    "ensembles only)")),
    CampaignKey("runs_dir", (str,), "runs",
                "results folder, relative to the working directory; ~ expanded",
                flag=Flag("--runs-dir", _HOW, "DIR"),
                form=FormField("text", help="relative to the working directory")),
    CampaignKey("experiments_file", (str,),
                doc="a user experiments file merged over the catalogue (relative to the "
                    "campaign file)",
                flag=Flag("--experiments-file", _HOW, "FILE",
                          help="a user experiments file merged over the catalogue"),
                form=FormField("text", hint="e.g. my_experiments.toml",
                               help="a user catalogue merged over the built-in one")),
    CampaignKey("save_models", (bool, str), False,
                "keep the trained models: true (every job's), \"best\" (the best trial or "
                "member) or false; an experiment may set its own (not in the cell key)",
                rule='false, true or "best"',
                flag=Flag("--save-models", _HOW, "true|best", const="true",
                          help="keep each job's trained weights under its attempt folder: "
                               "true (the flag alone) or best (the best trial or member "
                               "only); default false (campaign key save_models)"),
                form=FormField("select", ("false", "true", "best"), hint="default false",
                               help="keep the trained models: true (every job's), best (the "
                                    "best trial or member) or false")),
    CampaignKey("monitor", (bool,), True, "the per-cell sampler (engine/measure/monitor.py)"),
    CampaignKey("monitor_interval_s", (float,), 0.5, "seconds between monitor samples",
                bound=CAMPAIGN["monitor_interval_s"], unit="s",
                refusal="key 'monitor_interval_s' must be between {low} and {high} seconds, "
                        "got {value!r}"),
    CampaignKey("watchdog.action", (str,), "kill",
                "kill: kill a hung cell and retry it; flag: mark it and wait for a command",
                choices=WATCHDOG_ACTIONS,
                form=FormField("select", hint="", help="flag: mark a hung cell and wait for "
                                                       "you; kill: kill and retry it")),
    CampaignKey("watchdog.interval_s", (float,), 10.0, "seconds between hung-cell checks",
                bound=CAMPAIGN["watchdog.interval_s"], unit="s",
                refusal="key 'interval_s' must be a finite number > {low}, got {value}",
                form=FormField("float", help="seconds between checks")),
    CampaignKey("watchdog.suspect_after", (int,), 3,
                "checks without progress before a cell is suspect", unit="checks",
                rule=">= 1 and <= hung_after",
                form=FormField("int", help="quiet checks before 'suspect'")),
    CampaignKey("watchdog.hung_after", (int,), 6,
                "checks without progress before a cell is hung (>= suspect_after)",
                unit="checks", rule=">= suspect_after",
                form=FormField("int", help="quiet checks before 'hung'")),
    CampaignKey("watchdog.cpu_fraction", (float,), 0.05,
                "below this share of one core the cell's process tree counts as idle",
                bound=CAMPAIGN["watchdog.cpu_fraction"],
                refusal="key 'cpu_fraction' must be in [{low}, {high}), got {value}"),
    CampaignKey("watchdog.gpu_busy_pct", (float,), 5.0,
                "below this GPU utilisation (%) the device under test counts as idle",
                bound=CAMPAIGN["watchdog.gpu_busy_pct"],
                refusal="key 'gpu_busy_pct' must be in [{low}, {high}], got {value}"),
    CampaignKey("budget.ram", (str, int, float),
                doc="host RAM max_parallel = \"auto\" may fill: 6GiB, 512MiB or MiB (unset: "
                    "measured)",
                rule="a size > 0",
                form=FormField("size", hint="e.g. 6GiB (unset: measured)",
                               help="host RAM auto may fill, e.g. 6GiB (unset: measured)")),
    CampaignKey("budget.device", (str, int, float),
                doc="device memory max_parallel = \"auto\" may fill (unset: measured)",
                rule="a size > 0",
                form=FormField("size", hint="e.g. 40GiB (unset: measured)",
                               help="device memory auto may fill, e.g. 40GiB")),
    CampaignKey("budget.cores", (int,), doc="cores max_parallel = \"auto\" may use (unset: "
                                            "this machine's)",
                rule=">= 1",
                form=FormField("int", hint="e.g. 8 (unset: all cores)",
                               help="cores auto may use (unset: this machine's)")),
    CampaignKey("cluster", (str,), doc="the Ray cluster the cells run on: \"local\" or "
                                       "host:port (unset: this host)",
                rule="\"local\", host:port or ray://host:port"),
    CampaignKey("gpu", (str,), doc="with cluster: the GPU model cells need"),
    CampaignKey("cpus_per_cell", (int,), doc="with cluster: the CPUs each cell holds on its "
                                             "node"),
    CampaignKey("options", (dict,), doc="[options.<executor>]: each executor's options "
                                        "(docs/executors.md)"),
    CampaignKey("arrivals", (dict,),
                doc="jobs arriving over time (engine/define/arrivals.py): one stream cell per "
                    "executor serves them online; the experiments are the stream's templates",
                rule='{ process = "poisson", rate > 0, count 1-10000, seed, mix = { <id> = '
                     '<weight> > 0 } } or { trace = "file.csv" }'),
    CampaignKey("description", (str,), doc="free text, kept with the campaign"),
)}

#: The tables whose keys are declared with a dotted name.
TABLES = tuple(dict.fromkeys(k.table for k in KEYS.values() if k.table))


def key_types(table: str = "") -> dict[str, tuple[type, ...]]:
    """The allowed keys of ``table`` ("" the top level, ``watchdog``, ``budget``) and their
    types, as :func:`engine.define.tomlfile.check_keys` takes them; the top level includes
    each table as a key of type table."""
    out: dict[str, tuple[type, ...]] = {}
    for k in KEYS.values():
        if k.table == table:
            out[k.key] = k.types
        elif not table and k.table and k.table not in out:
            out[k.table] = (dict,)
    return out


#: Why a list-valued key names each value once (the one-line refusal says it).
_ONCE = {"experiments": "an experiment is one cell per executor already",
         "executors": "each executor is one cell per experiment already",
         "precision": "each precision is one cell already",
         "devices": "one cell per device at a time: a device listed twice would run two"}


def check_entries(values: list[Any], where: str, key: str) -> None:
    """The entries of a list-valued key (``experiments``, ``executors``, ``precision``,
    ``devices``, an executor option's axis such as ``scheduler``): none an empty string,
    none twice (a value listed twice runs nothing more, or runs a cell twice under one
    key). The same check for a campaign file, ``fugue-tui run``'s flags and the
    dashboard's plan form: all three reach it through the campaign's validation.

    Raises:
        ConfigError: ``"<where>: key 'experiments': entry 2 of 2 is empty (''): remove
            it"``, ``"<where>: key 'executors': 'seq' is listed twice (entries 1 and 2):
            give each once"``.
    """
    first: dict[tuple[type, Any], int] = {}
    for i, value in enumerate(values, 1):
        if isinstance(value, str) and not value.strip():
            raise ConfigError(f"{where}: key '{key}': entry {i} of {len(values)} is empty "
                              f"({quoted(value)}): remove it or give a value")
        try:
            marker = (type(value), value)
            hash(marker)
        except TypeError:  # a table or list in a list of names: its type check says so
            continue
        if marker in first:
            why = _ONCE.get(key, "a value listed twice runs the same cells twice")
            raise ConfigError(f"{where}: key '{key}': {shown(value)} is listed twice "
                              f"(entries {first[marker]} and {i}): give each once ({why})")
        first[marker] = i


def default(name: str) -> Any:
    """The declared default of key ``name`` (``seed`` → 42; ``executors`` → ``["seq"]``, a
    fresh list each call; a table, ``watchdog``, an empty one: its keys' defaults apply).
    Raises ``KeyError`` for an undeclared key."""
    if name in TABLES:
        return {}
    value = KEYS[name].default
    return list(value) if isinstance(value, tuple) else value


def value_of(doc: dict[str, Any], name: str) -> Any:
    """``doc``'s value of top-level key ``name``, else its declared default."""
    return doc[name] if name in doc else default(name)


def flags(group: str) -> list[CampaignKey]:
    """The keys that are ``run`` flags of ``group`` (``what``, ``how``), in order."""
    return [k for k in KEYS.values() if k.flag is not None and k.flag.group == group]


def flag_help(k: CampaignKey) -> str:
    """``run --help``'s line of a key's flag: its own words, or the doc with the choices and
    the default (``repeats of the whole matrix (default 1)``)."""
    assert k.flag is not None
    if k.flag.help:
        return k.flag.help
    parts = [f"one of {', '.join(k.choices)}"] if k.choices else []
    if k.default_text:
        # a choice quoted: "default 'default'" is compile_mode's default mode
        parts.append(f"default {k.default_text!r}" if k.choices else f"default {k.default_text}")
    return k.doc + (f" ({'; '.join(parts)})" if parts else "")


def form_hint(k: CampaignKey) -> str:
    """The plan form's placeholder of a key's field: its own hint, else ``default 1``,
    ``default 10 s`` (with the unit)."""
    assert k.form is not None
    if k.form.hint is not None:
        return k.form.hint
    if not k.default_text:
        return ""
    return f"default {k.default_text}" + (f" {k.unit}" if k.unit else "")


def _cell(text: str) -> str:
    """``text`` safe in a Markdown table cell: ``|`` escaped, ``<name>`` not read as HTML."""
    return re.sub(r"<([A-Za-z_][^<>]*)>", r"&lt;\1&gt;", text.replace("|", "\\|"))


def markdown_table() -> str:
    """README's table of campaign keys: one row per key (a table's keys as ``[watchdog]
    interval_s``), generated from :data:`KEYS`."""
    rows = ["| key | type | default | allowed | `run` flag | meaning |",
            "|---|---|---|---|---|---|"]
    for k in KEYS.values():
        name = f"`[{k.table}]` `{k.key}`" if k.table else f"`{k.name}`"
        default_cell = ("required" if k.required else
                        f"`{k.default_text}`" + (f" {k.unit}" if k.unit else "")
                        if k.default_text else "")
        cells = [name, k.type_text, default_cell, _cell(k.allowed_text),
                 f"`{k.flag.spelling}`" if k.flag else "", _cell(k.doc)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


__all__ = ["COMPILE_CHOICES", "COMPILE_MODES", "CampaignKey", "Flag", "FormField", "KEYS",
           "TABLES", "WATCHDOG_ACTIONS", "check_entries", "default", "flag_help", "flags", "form_hint",
           "key_types", "markdown_table", "value_of"]
