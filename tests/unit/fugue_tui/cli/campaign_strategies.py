"""Hypothesis strategies for campaign and experiments files (the fuzzer of issue 44,
``test_fuzz_campaigns.py``).

Valid campaigns must be common (the fuzzer asserts at least a third plan a cell), so a
campaign is built from the real names — catalogue ids, registered executors, the declared
campaign keys (:data:`engine.define.campaign_schema.KEYS`) and executor options with their
choices and bounds — and then, in about half the examples, mutated: an unknown key, a known
key with a value of any type, an out-of-range number, an unknown name, a missing
``experiments``, or damaged bytes. With an experiments file beside it about a quarter of
the time (one user experiment, mostly ``U1``, from a template, mutated the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

import tomli_w
from hypothesis import strategies as st

from engine.define.campaign_schema import (
    COMPILE_CHOICES,
    COMPILE_MODES,
    KEYS,
    WATCHDOG_ACTIONS,
    key_types,
)
from engine.define.experiment import EXPERIMENT_KEYS
from engine.registry import EXECUTORS

#: The files an example writes, in its working folder.
CAMPAIGN, EXPERIMENTS = "c.toml", "exps.toml"


@dataclass(frozen=True)
class Example:
    """One generated input: the campaign file's bytes and, when it names one, the
    experiments file's bytes (None: no experiments file)."""

    campaign: bytes
    experiments: bytes | None

    def __repr__(self) -> str:  # hypothesis prints the failing example: the files as text
        exps = "" if self.experiments is None else f", experiments={self.experiments!r}"
        return f"Example(campaign={self.campaign!r}{exps})"


# -- values of any type (what a mutation puts where a known value was) ------------------

#: Strings that parse as something for some key: selectors, devices, addresses, sizes.
_SPECIAL = ["", " ", "auto", "all", "-1", "1e9", "nan", "D_ens,", ",", "\n", "ü", "E08:", ":",
            "0", "99", "E17:E01", "1,,2", "D_ens D_cv", "cpu", "cuda", "cuda:0",
            "cuda:99999999999999999999", "GPU-", "MIG-x", "cpu,cuda:0", "local", "h:1", "h:0",
            "h:99999999999", "ray://h:1", "ray://", "[::1]:80", "6GiB", "-1GiB", "0MiB",
            "1e400GiB", "nanMiB", "inf", "1_000MiB", "0x10", "8 GiB", "fp32,bf16", "amp-bf16",
            "asha", "fifo,asha", "spawn", "forkserver", "~", "~nobody/x", "$HOME", ".",
            # digits str.isdigit() takes and int() does not, or reads as ASCII ones
            "\u00b2", "\u0661", "h:\u00b2", "h:\u0661", "E\u0661", "cuda:\u00b2",
            # paths: a component over 255 bytes, a NUL byte, a long path, a device
            "x" * 300, "r/" + "\u00e9" * 200, "a\x00b", "a/" * 600, "/dev/null", "/proc/1"]
_texts = st.text(max_size=40) | st.sampled_from(_SPECIAL)
# Key names may hold any text, line breaks included: every error line escapes them.
_key_names = st.text(st.characters(codec="utf-8"), max_size=12)
_numbers = (st.integers(min_value=-(2**63), max_value=2**63 - 1)
            | st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, -(2**63)])
            | st.floats(allow_nan=True, allow_infinity=True))
_scalars = st.booleans() | _numbers | _texts | st.datetimes(timezones=st.none())
ANY_VALUE = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(_key_names, inner, max_size=3), max_leaves=8)


# -- valid values, from the declarations ------------------------------------------------

_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True)
_PATH_PART = st.text(st.characters(codec="utf-8", exclude_characters="/\\\x00",
                                   exclude_categories=("Cc", "Cs")), min_size=1, max_size=12)
_RUNS_DIR = (st.sampled_from(["runs", "out/r1", "rüns", "a b", "r.d"])
             | st.lists(_PATH_PART, min_size=1, max_size=3).map("/".join))


def _valid_option(field) -> st.SearchStrategy:
    """A value ``field`` (an executor option) accepts."""
    if field.choices:
        one = st.sampled_from(field.choices)
        return one | st.lists(one, min_size=1, max_size=2, unique=True) if list in field.types \
            else one
    if bool in field.types:
        return st.booleans()
    if int in field.types:
        low = int(field.minimum) if field.minimum is not None else 0
        return st.integers(low, low + 3)
    return st.nothing()


@st.composite
def _options(draw, executors: list[str]) -> dict:
    out: dict = {}
    for name in draw(st.lists(st.sampled_from(executors), max_size=2, unique=True)):
        fields = EXECUTORS.get(name).option_fields
        table = {}
        for opt in draw(st.lists(st.sampled_from(sorted(fields)), max_size=2, unique=True)):
            if (f := fields[opt]).check is None:  # a check of its own: out of this scope
                table[opt] = draw(_valid_option(f))
        out[name] = table
    return out


@st.composite
def valid_campaign(draw, user_ids: tuple[str, ...] = ()) -> dict:
    """A campaign table every key of which is valid (the catalogue's offline ids, a few
    others whose cells plan as unavailable, and ``user_ids`` from an experiments file)."""
    ids = ["D_ens", "D_cv", "D_hpo", "D_mm", "D_reg", *user_ids]
    chosen = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
    experiments = draw(st.sampled_from([chosen, ",".join(chosen), chosen[0]])
                       | st.sampled_from(["D_ens", "E01", "E16:E17", "18", "D_ens,D_reg"]))
    if user_ids:
        experiments = [*user_ids, *chosen]
    doc: dict = {"experiments": experiments}
    executors = draw(st.lists(st.sampled_from(EXECUTORS.names()), min_size=1, max_size=3,
                              unique=True))
    if draw(st.booleans()):
        doc["executors"] = executors if len(executors) > 1 or draw(st.booleans()) \
            else executors[0]
    optional = {
        "passes": st.integers(1, 3), "seed": st.integers(0, 2**40),
        "retries": st.integers(0, 5), "threads": st.integers(0, 8),
        "device": st.sampled_from(["auto", "cpu"]), "compile": st.sampled_from(COMPILE_CHOICES),
        "compile_mode": st.sampled_from(COMPILE_MODES),
        "precision": st.sampled_from(["fp32", ["fp32"], ["fp32", "amp-fp16"]]),
        "amp": st.booleans(), "runs_dir": _RUNS_DIR, "name": _NAME,
        "monitor": st.booleans(), "monitor_interval_s": st.floats(0.1, 5.0),
        "description": st.text(max_size=60) | st.text(min_size=2000, max_size=4000),
        "watchdog": st.fixed_dictionaries({}, optional={
            "action": st.sampled_from(WATCHDOG_ACTIONS), "interval_s": st.floats(0.5, 60),
            "suspect_after": st.just(2), "hung_after": st.integers(2, 9)}),
        "budget": st.fixed_dictionaries({}, optional={
            "ram": st.sampled_from(["6GiB", "512MiB", 2048]), "cores": st.integers(1, 16)}),
        "options": _options(executors if "executors" in doc else ["seq"]),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), max_size=6, unique=True)):
        doc[key] = draw(optional[key])
    return doc


_JOB = {"type": "ensemble", "model": "mlp", "dataset": "wine", "k": 2, "batch_size": 8,
        "epochs": 1, "lr": 0.1}


@st.composite
def user_experiment(draw) -> dict:
    """A user experiment ``U1`` from a small ensemble, cv or hpo template."""
    job = dict(_JOB)
    job["type"] = draw(st.sampled_from(["ensemble", "cv", "hpo"]))
    job["k"] = draw(st.integers(1, 4))
    job["dataset"] = draw(st.sampled_from(["wine", "digits", "breast_cancer"]))
    job["epochs"] = draw(st.integers(1, 3))
    job["lr"] = draw(st.floats(1e-4, 1.0))
    if job["type"] == "hpo":
        del job["k"]
        job["search_space"] = draw(st.sampled_from(
            [{"lr": [0.01, 0.1]}, {"batch_size": [8, 16]}, {"lr": {"loguniform": [1e-4, 1e-1]}}]))
    if draw(st.booleans()):
        job["optimizer"] = draw(st.sampled_from(["sgd", "adam", "adamw"]))
    return job


# -- mutations ---------------------------------------------------------------------------

_TOP_TYPES = key_types()
_INTS = st.integers(min_value=-(2**64), max_value=2**64) | st.sampled_from([0, -1, 1, 2**63])
_FLOATS = st.floats() | st.sampled_from([0.0, -0.0, 1e-320, 1e308, float("inf")]) | _INTS
_DISTRIBUTIONS = st.sampled_from(["uniform", "loguniform", "randint", "choice", "grid", "x"])
#: The keys of the tables a mutation may fill with odd values of the right type.
_SUBKEYS = {
    "watchdog": [k.rpartition(".")[2] for k in KEYS if k.startswith("watchdog.")],
    "budget": [k.rpartition(".")[2] for k in KEYS if k.startswith("budget.")],
    "search_space": ["lr", "batch_size", "epochs", "k", "optimizer", "momentum",
                     "weight_decay", "hidden", "model_kwargs.hidden", "x"],
    "optimizer_kwargs": ["momentum", "weight_decay", "betas", "eps", "nesterov", "x"],
    "model_kwargs": ["hidden", "depth", "dropout", "width", "x"],
}


def _typed(types: tuple[type, ...], key: str = "") -> st.SearchStrategy:
    """An odd value of one of ``types``: any text, a huge or negative number, nan, an empty
    list, a table of the key's own sub-keys holding odd values."""
    out = []
    for kind in types:
        if kind is bool:
            out.append(st.booleans())
        elif kind is int:
            out.append(_INTS)
        elif kind is float:
            out.append(_FLOATS)
        elif kind is str:
            out.append(_texts)
        elif kind is list:
            out.append(st.lists(_texts | _INTS | _FLOATS, max_size=4))
        elif kind is dict and key == "options":
            out.append(st.dictionaries(
                st.sampled_from(EXECUTORS.names()),
                st.dictionaries(st.sampled_from(sorted({o for e in EXECUTORS.names()
                                                        for o in EXECUTORS.get(e).option_fields})),
                                _texts | _INTS | _FLOATS | st.booleans()
                                | st.lists(_texts | st.booleans(), max_size=3), max_size=3),
                max_size=2))
        elif kind is dict and key == "search_space":
            spec = (st.lists(_INTS | _FLOATS | _texts, max_size=4)
                    | st.dictionaries(_DISTRIBUTIONS, st.lists(_INTS | _FLOATS, max_size=3),
                                      min_size=1, max_size=2))
            out.append(st.dictionaries(st.sampled_from(_SUBKEYS[key]), spec, max_size=3))
        elif kind is dict:
            names = st.sampled_from(_SUBKEYS[key]) if key in _SUBKEYS else _key_names
            out.append(st.dictionaries(names, _texts | _INTS | _FLOATS | st.booleans()
                                       | st.lists(_FLOATS, max_size=3), max_size=3))
    return st.one_of(out) if out else ANY_VALUE


@st.composite
def _mutate(draw, doc: dict, types: dict[str, tuple[type, ...]]) -> dict:
    """``doc`` with one change: a key unknown, removed, holding an odd value of its own
    type (``types``: the keys and their types) or holding any value."""
    doc = dict(doc)
    keys = sorted(types)
    kind = draw(st.sampled_from(["typed", "typed", "unknown", "any", "number", "name",
                                 "drop"]))
    if kind == "unknown":
        doc[draw(_key_names | st.sampled_from(["pases", "exectors"]))] = \
            draw(ANY_VALUE)
    elif kind == "drop" and doc:
        doc.pop(draw(st.sampled_from(sorted(doc))))
    elif kind == "number":
        doc[draw(st.sampled_from(keys))] = draw(_numbers)
    elif kind == "name":
        key = draw(st.sampled_from(["experiments", "executors"] if "experiments" in keys
                                   else keys))
        doc[key] = draw(st.lists(_texts, max_size=3) | _texts)
    elif kind == "typed":
        key = draw(st.sampled_from(keys))
        doc[key] = draw(_typed(types[key], key))
    else:
        doc[draw(st.sampled_from(keys))] = draw(ANY_VALUE)
    return doc


@st.composite
def _damage(draw, data: bytes) -> bytes:
    """``data`` truncated, or with a few bytes replaced."""
    if draw(st.booleans()):
        return data[:draw(st.integers(0, len(data)))]
    cut = draw(st.integers(0, len(data)))
    return data[:cut] + draw(st.binary(min_size=1, max_size=4)) + data[cut + 1:]


def _dump(doc: dict) -> bytes:
    return tomli_w.dumps(doc).encode()


@st.composite
def examples(draw) -> Example:
    """A campaign file (and maybe an experiments file): valid about half the time."""
    experiments = None
    user_ids: tuple[str, ...] = ()
    if draw(st.integers(0, 3)) == 3:  # hypothesis favours the low end: rare is high
        # mostly U1; sometimes any name (an id names cell folders: checked at load)
        user_ids = (draw(_key_names) if draw(st.integers(0, 9)) == 9 else "U1",)
        job = draw(user_experiment())
        if draw(st.integers(0, 2)) == 2:
            job = draw(_mutate(job, EXPERIMENT_KEYS))
        experiments = _dump({"experiments": {user_ids[0]: job}})
    doc = draw(valid_campaign(user_ids))
    if user_ids:
        doc["experiments_file"] = EXPERIMENTS
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        doc = draw(_mutate(doc, _TOP_TYPES))
    campaign = _dump(doc)
    if draw(st.integers(0, 9)) == 9:
        campaign = draw(_damage(campaign))
    return Example(campaign, experiments)
