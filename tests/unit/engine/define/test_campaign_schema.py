"""Campaign keys declared once (issue 40, item 3): the declaration in
``engine.define.campaign_schema`` drives campaign parsing and its bound and choice checks,
the defaults, ``fugue-tui run``'s flags and their help, the plan form's fields and README's
table of campaign keys; a key added there appears in all of them. Also the default seed and
the scheduler names, each written once."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import tomllib
from pathlib import Path

import pytest

from engine.bounds import CAMPAIGN, DEFAULT_SEED, Bound
from engine.define import campaign_docs, campaign_schema
from engine.define.campaign import Campaign, load_campaign, parse_campaign
from engine.define.campaign_schema import KEYS, CampaignKey, Flag, FormField, default
from engine.define.watchdog_settings import WatchdogSettings
from engine.errors import ConfigError
from engine.plugins import load_plugins

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(autouse=True)
def _plugins():
    load_plugins()


def _at_least(low: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}")
        return value
    return parse


def _run_parser() -> argparse.ArgumentParser:
    from fugue_tui.commands.run_flags import add_run_arguments

    parser = argparse.ArgumentParser(prog="run", exit_on_error=False)
    add_run_arguments(parser, _at_least)
    return parser


# ------------------------------------------------------------------ docs

def test_the_readme_table_of_campaign_keys_is_up_to_date():
    text = campaign_docs.DOC.read_text()
    assert text.count(campaign_docs.BEGIN) == 1
    assert campaign_docs.with_table(text, campaign_schema.markdown_table()) == text


def test_the_docs_check_fails_when_the_declaration_drifts(monkeypatch, tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text(campaign_docs.with_table(f"x\n{campaign_docs.BEGIN}\n{campaign_docs.END}\n",
                                            campaign_schema.markdown_table()))
    monkeypatch.setattr(campaign_docs, "DOC", doc)
    assert campaign_docs.main(["--check"]) == 0
    monkeypatch.setitem(KEYS, "passes", dataclasses.replace(KEYS["passes"], default=2))
    assert campaign_docs.main(["--check"]) == 1
    assert campaign_docs.main([]) == 0 and campaign_docs.main(["--check"]) == 0
    assert "| `passes` | int | `2` |" in doc.read_text()


# ------------------------------------------------------------------ a key added once

@pytest.fixture
def added_key(monkeypatch):
    """A count declared only in the schema: a run flag and a form field."""
    key = CampaignKey("zz_count", (int,), 3, "a dummy count added by a test",
                      bound=Bound(1, 5, integer=True),
                      flag=Flag("--zz-count", "how", "N", checked=True),
                      form=FormField("int"))
    monkeypatch.setitem(KEYS, key.name, key)
    return key


def test_an_added_key_is_parsed_and_its_bound_checked(added_key):
    doc = {"experiments": "D_ens", "zz_count": 4}
    assert parse_campaign(doc, "c.toml").experiments == ["D_ens"]
    with pytest.raises(ConfigError) as caught:
        parse_campaign({**doc, "zz_count": 9}, "c.toml")
    assert str(caught.value) == "c.toml: key 'zz_count' must be <= 5, got 9"
    with pytest.raises(ConfigError, match="key 'zz_count' must be an integer"):
        parse_campaign({**doc, "zz_count": "many"}, "c.toml")


def test_an_added_key_is_a_run_flag_with_its_help(added_key):
    parser = _run_parser()
    assert parser.parse_args(["--zz-count", "2"]).run_zz_count == 2
    assert parser.parse_args([]).run_zz_count is None  # unset: the campaign's default
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--zz-count", "0"])  # the bound's low end, checked by argparse
    assert "a dummy count added by a test (default 3)" in " ".join(parser.format_help().split())


def test_an_added_key_is_a_form_field(added_key):
    from fugue_tui.app.widgets.campaign_form import _fields

    fields = {f.path: f for f in _fields()}
    assert fields["zz_count"].kind == "int" and fields["zz_count"].hint == "default 3"
    assert fields["zz_count"].help == "a dummy count added by a test"


def test_an_added_key_is_in_the_docs_table(added_key):
    assert ("| `zz_count` | int | `3` | integer >= 1 and <= 5 | `--zz-count` | a dummy count "
            "added by a test |") in campaign_schema.markdown_table()


# ------------------------------------------------------------------ bounds and choices

def _bad(bound: Bound) -> float:
    """A value past one end of ``bound``."""
    if bound.high is not None:
        return bound.high + (1 if bound.integer else 0.5 * max(1.0, bound.high))
    return (bound.low or 0) - 1


def _toml(name: str, value: object) -> str:
    table, _, key = name.rpartition(".")
    text = f"{key} = {value!r}\n".replace("'", '"')
    return 'experiments = "D_ens"\n' + (f"[{table}]\n{text}" if table else text)


BOUNDED = [k for k in KEYS.values() if k.bound is not None]


@pytest.mark.parametrize("key", BOUNDED, ids=[k.name for k in BOUNDED])
def test_a_value_past_each_declared_bound_is_refused_in_one_line(key, tmp_path):
    path = tmp_path / "c.toml"
    value = _bad(key.bound)
    path.write_text(_toml(key.name, value))
    with pytest.raises(ConfigError) as caught:
        load_campaign(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    assert key.key in message and str(value).removesuffix(".0") in message


CHOICES = [k for k in KEYS.values() if k.choices]


@pytest.mark.parametrize("key", CHOICES, ids=[k.name for k in CHOICES])
def test_a_value_outside_each_declared_choice_is_refused_naming_them(key, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(_toml(key.name, "zz-nope"))
    with pytest.raises(ConfigError) as caught:
        load_campaign(path)
    where = f"{path}: {key.table}" if key.table else str(path)
    assert str(caught.value) == (f"{where}: key '{key.key}' must be one of "
                                 f"{', '.join(key.choices)}, got 'zz-nope'")


@pytest.mark.parametrize(("text", "message"), [
    ("passes = 0\n", "key 'passes' must be between 1 and 1000, got 0"),
    ("threads = -1\n", "key 'threads' must be >= 0 (0 = all cores), got -1"),
    ("retries = -1\n", "key 'retries' must be >= 0, got -1"),
    ("monitor_interval_s = 0.01\n", "key 'monitor_interval_s' must be between 0.05 and 60 "
                                    "seconds, got 0.01"),
    ("[watchdog]\ninterval_s = 0\n", "watchdog: key 'interval_s' must be a finite number > 0, "
                                     "got 0.0"),
    ("[watchdog]\ncpu_fraction = 1\n", "watchdog: key 'cpu_fraction' must be in [0, 1), got 1.0"),
    ("[watchdog]\ngpu_busy_pct = 101\n", "watchdog: key 'gpu_busy_pct' must be in [0, 100], "
                                         "got 101.0"),
    ("[watchdog]\nsuspect_after = 7\n", "watchdog: need 1 <= suspect_after <= hung_after, got 7 "
                                        "and 6"),
])
def test_the_refusals_keep_their_words(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_campaign(tomllib.loads('experiments = "D_ens"\n' + text), "c.toml")
    assert str(caught.value) == f"c.toml: {message}"


def test_every_campaign_bound_belongs_to_a_declared_key():
    declared = {k.name: k.bound for k in KEYS.values() if k.bound is not None}
    assert declared == CAMPAIGN


# ------------------------------------------------------------------ defaults, once

def test_the_dataclasses_take_the_declared_defaults():
    fields = {f.name: f.default for f in dataclasses.fields(Campaign)}
    for name in ("passes", "seed", "device", "compile", "compile_mode", "threads", "retries",
                 "monitor", "monitor_interval_s", "one_cell_per_host"):
        assert fields[name] == default(name), name
    assert fields["runs_dir"] == Path(default("runs_dir"))
    watchdog = WatchdogSettings()
    for f in dataclasses.fields(WatchdogSettings):
        assert getattr(watchdog, f.name) == default(f"watchdog.{f.name}")
    parsed = parse_campaign({"experiments": "D_ens"}, "c.toml")
    assert (parsed.seed, parsed.executors, parsed.passes) == (DEFAULT_SEED, ["seq"], 1)


def test_a_changed_default_reaches_the_parsed_campaign(monkeypatch):
    monkeypatch.setitem(KEYS, "retries", dataclasses.replace(KEYS["retries"], default=2))
    assert parse_campaign({"experiments": "D_ens"}, "c.toml").retries == 2


def test_the_run_flags_keep_their_dests_and_parsing():
    args = _run_parser().parse_args(
        ["--exp", "D_ens", "--exp", "D_cv", "--exec", "seq", "mp", "--passes", "2", "--compile",
         "--precision", "fp32,bf16", "--seed", "-1", "--threads", "0", "--k-sweep", "1,2",
         "--runs-dir", "r", "--device", "cpu", "--experiments-file", "e.toml"])
    assert (args.run_exp, args.run_exec, args.run_passes, args.run_compile) == (
        ["D_ens", "D_cv"], ["seq", "mp"], 2, "on")
    assert (args.run_precision, args.run_seed, args.run_threads, args.run_k_sweep) == (
        [["fp32", "bf16"]], -1, 0, "1,2")  # a negative seed is the campaign check's to refuse
    assert (args.run_runs_dir, args.run_device, args.run_experiments_file) == ("r", "cpu",
                                                                               "e.toml")
    with pytest.raises(argparse.ArgumentError):
        _run_parser().parse_args(["--passes", "0"])
    with pytest.raises(argparse.ArgumentError):
        _run_parser().parse_args(["--compile", "maybe"])


# ------------------------------------------------------------------ written once

def _seed_defaults(path: Path) -> list[int]:
    """Lines where a ``seed`` parameter or field defaults to the literal 42, or ``42`` is
    passed as a seed."""
    tree = ast.parse(path.read_text())
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "seed" in node.target.id and isinstance(node.value, ast.Constant) \
                    and node.value.value == 42:
                lines.append(node.lineno)
        if isinstance(node, ast.arguments):
            args = node.posonlyargs + node.args
            for arg, value in zip(args[len(args) - len(node.defaults):], node.defaults, strict=True):
                if "seed" in arg.arg and isinstance(value, ast.Constant) and value.value == 42:
                    lines.append(value.lineno)
            for arg, value in zip(node.kwonlyargs, node.kw_defaults, strict=True):
                if value is not None and "seed" in arg.arg and isinstance(value, ast.Constant) \
                        and value.value == 42:
                    lines.append(value.lineno)
        if isinstance(node, ast.keyword) and node.arg and "seed" in node.arg \
                and isinstance(node.value, ast.Constant) and node.value.value == 42:
            lines.append(node.lineno)
        if isinstance(node, ast.BoolOp) and any(
                isinstance(v, ast.Constant) and v.value == 42 for v in node.values) and any(
                isinstance(v, ast.Attribute) and "seed" in v.attr for v in node.values):
            lines.append(node.lineno)
    return lines


def test_the_default_seed_is_written_once(tmp_path):
    found = {}
    for top in ("engine", "fugue_tui", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            lines = _seed_defaults(path)
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    assert found == {}
    # the scan is not blind: each way of writing the default is seen
    sample = tmp_path / "sample.py"
    sample.write_text("from dataclasses import dataclass\n"
                      "@dataclass\nclass A:\n    seed: int = 42\n"
                      "def f(seed=42, *, base_seed=42): ...\n"
                      "f(seed=42)\n"
                      "x = A().seed or 42\n")
    assert sorted(_seed_defaults(sample)) == [4, 5, 5, 6, 7]


def test_the_scheduler_names_are_one_list():
    from engine.executors import SCHEDULER_CHOICES
    from engine.executors.ray.options import RAY_SCHEDULERS, TUNE_SCHEDULERS
    from engine.registry import EXECUTORS
    from engine.train.early_stop import SCHEDULERS

    # the training side cannot import the executors' package (a sibling cycle): pinned here
    assert SCHEDULERS == SCHEDULER_CHOICES
    assert set(RAY_SCHEDULERS) == set(SCHEDULER_CHOICES) and RAY_SCHEDULERS[:4] == TUNE_SCHEDULERS
    assert EXECUTORS.get("ray").option_fields["scheduler"].choices == RAY_SCHEDULERS
    for name in ("seq", "mp", "unified_model"):
        assert EXECUTORS.get(name).option_fields["scheduler"].choices == SCHEDULER_CHOICES


def test_keys_checked_by_a_rule_of_their_own_say_it_in_the_docs():
    """A key checked across keys or by its parser (no bound, no choices) declares what it
    allows, so README's "allowed" column is never blank for a checked key."""
    assert KEYS["watchdog.suspect_after"].allowed_text == ">= 1 and <= hung_after"
    assert KEYS["budget.cores"].allowed_text == ">= 1"
    table = campaign_schema.markdown_table()
    for name in ("watchdog.suspect_after", "watchdog.hung_after", "budget.ram",
                 "budget.device", "budget.cores", "cluster"):
        key = KEYS[name]
        row = next(line for line in table.splitlines() if f"`{key.key}` |" in line
                   and (not key.table or f"`[{key.table}]`" in line))
        assert f"| {key.allowed_text} |" in row.replace('\\"', '"') or key.allowed_text in row
