"""Issue 44, a campaign's content: lists name each value once and hold no empty entry,
error lines stay one line whatever a value holds, and a sampled ``search_space`` range is
checked whole at load time, whatever the seed (the command-line side of each is a row of
``tests/unit/fugue_tui/cli/test_bad_input_matrix.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.define.campaign import load_campaign
from engine.define.search_space import draw
from engine.errors import ConfigError, OutputError, escape_controls, quoted
from engine.plugins import load_builtins

_HPO = ('[experiments.U_h]\ntype = "hpo"\nmodel = "mlp"\ndataset = "wine"\nbatch_size = 8\n'
        'epochs = 1\nlr = 0.01\nsearch_space = {{ "model_kwargs.hidden" = {{ {dist} }} }}\n')


def _load(tmp_path: Path, campaign: str, experiments: str | None = None):
    load_builtins()
    if experiments is not None:
        (tmp_path / "mine.toml").write_text(experiments)
        campaign += 'experiments_file = "mine.toml"\n'
    path = tmp_path / "c.toml"
    path.write_text(campaign)
    return load_campaign(path)


def test_a_sampled_range_is_refused_for_every_seed_not_only_those_that_draw_outside(tmp_path):
    """``randint = [0, 10]`` for ``model_kwargs.hidden`` (mlp's bound: >= 1): before, seed 2
    (whose one trial draws 0) was refused and seed 42 (which draws 5) loaded and ran."""
    dist = "randint = [0, 10]"
    assert draw({"randint": [0, 10]}, 2, 0, "model_kwargs.hidden") == 0
    assert draw({"randint": [0, 10]}, 42, 0, "model_kwargs.hidden") == 5
    for seed in (2, 42):
        with pytest.raises(ConfigError) as err:
            _load(tmp_path, f'experiments = "U_h"\nseed = {seed}\n', _HPO.format(dist=dist))
        message = str(err.value)
        for needle in ("mine.toml: experiments.U_h.search_space", "'model_kwargs.hidden'",
                       "randint [0, 10] can draw 0 to 9", "model 'mlp'",
                       "integer >= 1 and <= 65536"):
            assert needle in message, message


@pytest.mark.parametrize("dist, needle", [
    ("uniform = [1, 10]", "must be an integer, got 1.0"),  # floats for an integer key
    ("choice = [16, 0]", "must be >= 1, got 0"),           # every choice, not the drawn one
    ("randint = [1, 65538]", "must be <= 65536, got 65537"),  # high end exclusive: 65537
])
def test_every_distribution_is_checked_over_all_it_can_yield(tmp_path, dist, needle):
    with pytest.raises(ConfigError, match="U_h.search_space") as err:
        _load(tmp_path, 'experiments = "U_h"\n', _HPO.format(dist=dist))
    assert needle in str(err.value)


def test_a_valid_range_loads_and_the_high_end_of_randint_is_exclusive(tmp_path):
    campaign = _load(tmp_path, 'experiments = "U_h"\n',
                     _HPO.format(dist="randint = [1, 65537]"))
    assert campaign.experiments == ["U_h"]


def test_an_optimizer_keyword_and_batch_size_range_are_checked_whole(tmp_path):
    base = _HPO.split("search_space")[0] + 'optimizer = "sgd"\n'
    with pytest.raises(ConfigError, match="optimizer keyword 'momentum' takes >= 0 and <= 1"):
        _load(tmp_path, 'experiments = "U_h"\n',
              base + "search_space = { momentum = { uniform = [0.5, 2.0] } }\n")
    with pytest.raises(ConfigError, match="above 142, the training samples of wine"):
        _load(tmp_path, 'experiments = "U_h"\n',
              base + "search_space = { batch_size = { randint = [8, 1000] } }\n")


def test_ranges_and_all_stay_unions_while_a_name_twice_is_refused(tmp_path):
    assert _load(tmp_path, 'experiments = ["E01:E03", "E02"]\n').experiments == [
        "E01", "E02", "E03"]
    with pytest.raises(ConfigError, match=r"'E02' \('2' and 'E02'\) is listed twice"):
        _load(tmp_path, 'experiments = ["2", "E02"]\n')


def test_error_text_is_one_line_whatever_the_value_holds():
    assert escape_controls("a\nb\tc\x1bd\u2028e") == "a\\nb\\tc\\x1bd\\u2028e"
    assert escape_controls("plain ünïcode × …") == "plain ünïcode × …"
    assert quoted("ep\nochs") == "'ep\\nochs'"
    # the base class keeps every FugueError's line whole, whoever built the message
    for error in (ConfigError("c.toml: unknown key 'bad\nkey'"), OutputError("x\r\ny")):
        assert len(str(error).splitlines()) == 1, str(error)


def test_the_plan_form_and_a_file_share_the_list_check():
    """The dashboard's comma-list field reaches the same check as a file's list."""
    from fugue_tui.app.models.form_fields import campaign_fields, set_setting
    from fugue_tui.app.models.plan import default_doc, preview

    doc = default_doc()
    doc["experiments"] = ["D_ens"]
    field = next(f for f in campaign_fields() if f.path == "precision")
    assert set_setting(doc, field, "fp32, fp32") == ""
    error = preview(doc).error
    assert "key 'precision': 'fp32' is listed twice" in error, error
