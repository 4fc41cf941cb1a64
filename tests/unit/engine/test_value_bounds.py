"""Every count and number a campaign or an experiments file gives is finite and inside the
bounds of ``engine/bounds.py``, checked while the campaign loads; a name that no registry
knows, written in a user's experiments file, is refused there too, while a catalogue entry
that cannot run on this machine stays a ``skipped`` cell (issue 18).

In-process rows of the same checks as ``tests/unit/fugue_tui/cli/test_bad_input_values.py`` (which runs the
issue's own inputs through the command line), and the plan-size bound.
"""

from __future__ import annotations

import itertools
import math
import time

import pytest

from engine import bounds
from engine.define import matrix
from engine.define.campaign import load_campaign
from engine.errors import ConfigError
from engine.registry import MODELS, register_model
from engine.runner.supervisor import Runner

_U = {"type": '"ensemble"', "model": '"mlp"', "dataset": '"wine"', "k": "2",
      "batch_size": "8", "epochs": "1", "lr": "0.01"}


def _load(tmp_path, exps: str, campaign: str = 'experiments = "U"\n'):
    (tmp_path / "mine.toml").write_text(exps)
    (tmp_path / "c.toml").write_text(campaign + 'experiments_file = "mine.toml"\n'
                                     'device = "cpu"\n' f'runs_dir = "{tmp_path / "runs"}"\n')
    return load_campaign(tmp_path / "c.toml")


def _user(**change: str) -> str:
    return "[experiments.U]\n" + "".join(f"{k} = {v}\n" for k, v in {**_U, **change}.items())


def _mm(members: list[str]) -> str:
    return ('[experiments.U]\ntype = "multi_model"\nbatch_size = 8\nepochs = 1\nlr = 0.01\n'
            "members = [\n" + "".join(f"  {{ {m} }},\n" for m in members) + "]\n")


_SPACE_4608 = ("search_space = { lr = [" + ", ".join(f"0.{i + 1}" for i in range(9)) + "], "
               "batch_size = [1, 2, 3, 4, 5, 6, 7, 8], epochs = [1, 2, 3, 4, 5, 6, 7, 8], "
               "weight_decay = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7] }\n")

ROWS = [
    # counts
    pytest.param(_user(k="4097"), "U", ("experiments.U", "key 'k'", "<= 4096", "4097"),
                 id="k-4097"),
    pytest.param("[experiments.D_hpo]\n" + _SPACE_4608, "D_hpo",
                 ("experiments.D_hpo", "search_space", "4608", "at most 4096"),
                 id="hpo-grid-4608-points"),
    pytest.param(_mm(['model = "mlp", dataset = "wine"'] * 4097), "U",
                 ("experiments.U", "members", "4097", "at most 4096"), id="members-4097"),
    pytest.param(_user(batch_size="2000000", dataset='"cifar10"'), "U",
                 ("experiments.U", "key 'batch_size'", "<= 1048576", "2000000"),
                 id="batch-size-two-million"),
    pytest.param(_user(epochs="100001"), "U", ("key 'epochs'", "<= 100000"), id="epochs-100001"),
    pytest.param(_user(split_seed="-1"), "U", ("key 'split_seed'", ">= 0", "-1"),
                 id="split-seed-negative"),
    # finite numbers
    pytest.param(_user(lr="nan"), "U", ("key 'lr'", "must be finite", "nan"), id="lr-nan"),
    pytest.param("[experiments.D_hpo]\nsearch_space = { lr = [0.1, inf] }\n", "D_hpo",
                 ("D_hpo.search_space", "key 'lr'", "finite", "inf"), id="search-space-lr-inf"),
    pytest.param(_mm(['model = "mlp", dataset = "wine"',
                      'model = "mlp", dataset = "wine", lr = inf']), "U",
                 ("U.members[1]", "key 'lr'", "finite"), id="member-lr-inf"),
    # optimizer keywords
    pytest.param('[experiments.D_cv]\noptimizer_kwargs = { betas = [1.5, 0.999] }\n', "D_cv",
                 ("D_cv", "'betas'", "< 1", "1.5"), id="betas-above-1"),
    pytest.param('[experiments.D_cv]\noptimizer_kwargs = { eps = -1e-8 }\n', "D_cv",
                 ("D_cv", "'eps'", ">= 0", "-1e-08"), id="eps-negative"),
    pytest.param('[experiments.D_ens]\noptimizer_kwargs = { momentum = 1.5 }\n', "D_ens",
                 ("D_ens", "'momentum'", "<= 1", "1.5"), id="momentum-1.5"),
    pytest.param('[experiments.D_ens]\noptimizer_kwargs = { momentum = 0.0, nesterov = true }\n',
                 "D_ens", ("D_ens", "nesterov", "momentum > 0"), id="nesterov-without-momentum"),
    pytest.param('[experiments.D_hpo]\nsearch_space = { weight_decay = [0.0, -1.0], batch_size = [16], lr = [0.01] }\n',
                 "D_hpo", ("D_hpo", "'weight_decay'", ">= 0", "-1.0"),
                 id="search-space-weight-decay-negative"),
    # model_kwargs
    pytest.param('[experiments.D_ens]\nmodel_kwargs = { dropout = 1.5 }\n', "D_ens",
                 ("model 'mlp_bn'", "'dropout'", "< 1", "1.5"), id="dropout-1.5"),
    pytest.param('[experiments.D_ens]\nmodel_kwargs = { hidden = 2.5 }\n', "D_ens",
                 ("model 'mlp_bn'", "'hidden'", "an integer", "2.5"), id="hidden-not-integer"),
    pytest.param('[experiments.D_ens]\nmodel_kwargs = { hidden = 10000000 }\n', "D_ens",
                 ("model 'mlp_bn'", "'hidden'", "<= 65536"), id="hidden-ten-million"),
    pytest.param('[experiments.E01]\nmodel_kwargs = { width_per_group = nan }\n', "E01",
                 ("model 'resnet18'", "'width_per_group'", "finite"),
                 id="passed-on-model-kwarg-nan"),
    # names a user's file writes
    pytest.param(_mm(['model = "mlp", dataset = "wine"', 'model = "lenett", dataset = "digits"']),
                 "U", ("U.members[1]", "key 'model'", "unknown model 'lenett'",
                       "did you mean 'lenet'"), id="member-unknown-model"),
    pytest.param('[experiments.D_hpo]\nsearch_space = { model = ["mlp", "mlp_bm"], batch_size = [16], lr = [0.01] }\n', "D_hpo",
                 ("D_hpo.search_space", "key 'model'", "unknown model 'mlp_bm'",
                  "did you mean 'mlp_bn'"), id="search-space-unknown-model"),
    # the campaign's own counts
    pytest.param("", 'experiments = "D_ens"\nretries = 1000000\n',
                 ("c.toml", "key 'retries'", "<= 100", "1000000"), id="retries-a-million"),
]


#: (the user's file, the selection or the whole campaign text, what the line must name)
@pytest.mark.parametrize("exps, selected, needles", ROWS)
def test_a_bad_value_is_refused_at_load_naming_file_experiment_and_key(tmp_path, exps,
                                                                       selected, needles):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, exps, selected if "\n" in selected else f'experiments = "{selected}"\n')
    line = str(caught.value)
    assert "\n" not in line
    assert "mine.toml" in line or not exps, line
    for needle in needles:
        assert needle in line, (needle, line)


def test_the_bounds_hold_at_their_documented_ends(tmp_path):
    """K = 4096, epochs = 100000, threads = 1024, retries = 100 load; one more is refused."""
    campaign = _load(tmp_path, _user(k="4096", epochs="100000", lr="1e300"),
                     'experiments = "U"\nthreads = 1024\nretries = 100\n')
    assert campaign.catalogue.get("U").k == 4096 and campaign.threads == 1024
    for exps, extra, needle in ((_user(k="4097"), "", "key 'k' must be <= 4096, got 4097"),
                                (_user(epochs="100001"), "", "key 'epochs' must be <= 100000"),
                                (_user(), "threads = 1025\n", "key 'threads' must be <= 1024"),
                                (_user(), "retries = 101\n", "key 'retries' must be <= 100")):
        with pytest.raises(ConfigError, match=needle):
            _load(tmp_path, exps, 'experiments = "U"\n' + extra)


# --------------------------------------------------------------------------- names vs skipped

def test_a_users_unknown_model_is_a_load_error_but_a_catalogue_entry_that_cannot_run_is_skipped(
        tmp_path, monkeypatch):
    """The rule (issue 18): a name no registry knows, written in the user's own file, is an
    error while loading (file, experiment, key, did-you-mean); what the catalogue defines and
    this machine cannot run (a dataset not on disk, a model only a plugin provides, an
    optional module not installed) stays a ``skipped`` cell with its reason."""
    monkeypatch.setenv("FUGUE_DATA_DIR", str(tmp_path / "no-data"))
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _user(model='"resnet81"'))
    line = str(caught.value)
    assert line.startswith(f"{tmp_path / 'mine.toml'}: experiments.U")
    assert "key 'model'" in line and "did you mean 'resnet18'" in line, line

    # A model registered (by a plugin, say) whose optional module is missing here.
    register_model("needs_absent_module", requires="no_such_module_xyz")(lambda s, n: None)
    try:
        exps = (_user(model='"needs_absent_module"')
                # overriding a catalogue entry without touching its names keeps it runnable-or-
                # skipped: E17's members need a plugin, E01's cifar10 is not in FUGUE_DATA_DIR
                + '[experiments.E17]\ndescription = "mine"\n[experiments.E01]\nepochs = 1\n')
        campaign = _load(tmp_path, exps, 'experiments = "U,E17,E01"\n')
        skips = {p.cell.exp_id: p.skip for p in Runner(campaign).plan()}
    finally:
        MODELS.items.pop("needs_absent_module")
    assert "needs no_such_module_xyz" in skips["U"]
    assert "is not registered" in skips["E17"]
    assert "CIFAR-10 not found" in skips["E01"]


# --------------------------------------------------------------------------- the plan's size

def test_a_campaign_beyond_the_cell_bound_is_refused_before_its_cells_are_built(tmp_path,
                                                                               monkeypatch):
    expanded = []
    monkeypatch.setattr(matrix, "expand", lambda *a, **k: expanded.append(a) or [])
    campaign = _load(tmp_path, "", 'experiments = "D_ens,D_cv"\nexecutors = ["seq", "mp", '
                                   '"ray"]\ncompile = "both"\npasses = 1000\n')
    with pytest.raises(ConfigError) as caught:
        matrix.build_cells(campaign, {})
    line = str(caught.value)
    assert str(tmp_path / "c.toml") in line and "12000 cells" in line, line
    assert f"at most {bounds.MAX_CELLS}" in line and expanded == []


def test_a_maximal_legal_plan_builds_fast_with_the_keys_of_the_plain_hash(tmp_path):
    """K = 4096 jobs in every cell, and as many cells as that allows: the jobs are serialised
    and hashed once per experiment and configuration, not once per cell (the issue's
    ``--dry-run`` that ran for minutes). Keys stay the plain sha256 of canonical JSON."""
    passes = bounds.MAX_PLANNED_JOBS // (4096 * 2)
    campaign = _load(tmp_path, _user(k="4096"),
                     f'experiments = "U"\nexecutors = ["seq", "mp"]\npasses = {passes}\n')
    t0 = time.perf_counter()
    cells = matrix.build_cells(campaign, {"host": "h"})
    took = time.perf_counter() - t0
    assert sum(len(c.jobs) for c in cells) <= bounds.MAX_PLANNED_JOBS
    assert took < 20, took  # ~1 s on the 2-core reference VM; minutes before
    from engine.define.executor_options import key_options
    from engine.registry import EXECUTORS

    for cell in itertools.islice(cells, 0, None, max(1, len(cells) // 3)):
        literal, resolved = key_options(EXECUTORS.get(cell.executor).option_fields,
                                        cell.options, cell.experiment["type"])
        config = {"experiment": cell.experiment, "jobs": cell.jobs, "executor": cell.executor,
                  "options": literal, "seed": campaign.seed, "pass": cell.pass_index,
                  "threads": campaign.threads, "compile_mode": cell.compile_mode}
        if resolved:  # mp's default start (forkserver) is not the legacy spawn
            config["resolved"] = resolved
        assert cell.key == matrix.cell_key(config, {"host": "h"})
        assert cell.config_key == matrix._digest({k: v for k, v in config.items()
                                                  if k != "pass"})


def test_the_bounds_table_is_documented_in_the_readme():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert bounds.markdown_table() in readme
    assert all(math.isfinite(b.high) for b in bounds.COUNTS.values())


def test_errors_show_values_as_toml_writes_them():
    """A user wrote `k = true` in TOML; the error said `got True` (Python's spelling)."""
    from engine.bounds import Bound
    from engine.define.tomlfile import check_keys
    from engine.errors import ConfigError, shown

    assert [shown(v) for v in (True, False, float("inf"), float("-inf"), float("nan"), "x", 2)] \
        == ["true", "false", "inf", "-inf", "nan", "'x'", "2"]
    with pytest.raises(ConfigError, match=r"key 'k' must be an integer, got true$"):
        check_keys({"k": True}, {"k": (int,)}, "c.toml")
    assert Bound(low=0, integer=False).problem(float("nan")) == "must be finite, got nan"
