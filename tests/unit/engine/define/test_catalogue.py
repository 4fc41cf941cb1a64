"""The experiment catalogue: E01–E17 as the fugue harness defined them
(``docs/fugue-compat.md``), the offline D_* family, the selection syntax,
and merging a user's experiments file over the built-in one."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from engine.define.catalogue import load_catalogue
from engine.errors import ConfigError

CAT = load_catalogue()
FUGUE_IDS = [f"E{i:02d}" for i in range(1, 18)]
OFFLINE_IDS = ["D_ens", "D_cv", "D_hpo", "D_mm", "D_reg"]

# id: (type, model, dataset, k, batch, epochs, lr, optimizer, momentum, amp, size)
SGD, ADAM, ADAMW = "sgd", "adam", "adamw"
TABLE = {
    "E01": ("ensemble", "resnet18", "cifar10", 3, 128, 10, 0.01, SGD, 0.9, True, "medium"),
    "E02": ("ensemble", "resnet18", "cifar10", 7, 128, 10, 0.01, SGD, 0.9, True, "medium"),
    "E03": ("ensemble", "resnet50", "cifar100", 2, 64, 15, 0.01, SGD, 0.9, True, "large"),
    "E04": ("ensemble", "resnet50", "cifar100", 5, 64, 15, 0.01, SGD, 0.9, True, "large"),
    "E05": ("ensemble", "mlp", "cal_housing", 5, 256, 20, 0.001, ADAM, None, False, "small"),
    "E06": ("ensemble", "mlp", "cal_housing", 15, 256, 20, 0.001, ADAM, None, False, "small"),
    "E07": ("cv", "mobilenet_v3_small", "cifar10", 3, 256, 5, 0.001, ADAMW, None, True, "small"),
    "E08": ("cv", "resnet18", "cifar100", 3, 128, 5, 0.001, ADAMW, None, True, "medium"),
    "E09": ("cv", "mobilenet_v3_small", "cifar100", 5, 64, 8, 0.001, ADAMW, None, True, "small"),
    "E10": ("cv", "resnet18", "cifar10", 5, 32, 8, 0.001, ADAMW, None, True, "medium"),
    "E11": ("cv", "resnet50", "cifar100", 5, 16, 5, 0.001, ADAMW, None, True, "large"),
}
# id: (model, dataset, epochs, lr options, batch options, size)
HPO = {
    "E12": ("resnet18", "cifar10", 5, [1e-4, 3e-4, 1e-3], [64, 128], "medium"),
    "E13": ("resnet50", "cifar10", 5, [1e-4, 3e-4, 1e-3], [32, 64], "large"),
    "E14": ("simplecnn", "cifar10", 10, [1e-4, 5e-4, 1e-3, 3e-3], [32, 64], "small"),
    "E15": ("mobilenet_v3_small", "cifar100", 10, [1e-4, 3e-4, 1e-3], [32, 64, 128], "small"),
}


# --------------------------------------------------------------------------- the table

def test_catalogue_order_is_fugue_ids_then_offline_family():
    assert CAT.ids() == FUGUE_IDS + OFFLINE_IDS


@pytest.mark.parametrize("exp_id", sorted(TABLE))
def test_ensemble_and_cv_rows_match_fugue(exp_id):
    wtype, model, dataset, k, batch, epochs, lr, opt, momentum, amp, size = TABLE[exp_id]
    exp = CAT.get(exp_id)
    assert (exp.type, exp.model, exp.dataset, exp.k) == (wtype, model, dataset, k)
    assert (exp.batch_size, exp.epochs, exp.optimizer, exp.amp, exp.size) == (
        batch, epochs, opt, amp, size)
    assert exp.lr == pytest.approx(lr, rel=1e-12)
    if momentum is None:
        assert "momentum" not in exp.optimizer_kwargs
    else:
        assert exp.optimizer_kwargs == {"momentum": momentum}
    assert exp.search_space == {} and exp.members == ()


def test_e05_e06_are_regression_and_adamw_rows_keep_torch_default_weight_decay():
    assert CAT.get("E05").task == CAT.get("E06").task == "regression"
    for exp_id in ("E07", "E08", "E09", "E10", "E11"):
        assert CAT.get(exp_id).optimizer_kwargs == {}  # torch's default weight decay


@pytest.mark.parametrize("exp_id", sorted(HPO))
def test_hpo_rows_match_fugue_and_k_is_the_grid_size(exp_id):
    model, dataset, epochs, lrs, batches, size = HPO[exp_id]
    exp = CAT.get(exp_id)
    assert (exp.type, exp.model, exp.dataset, exp.epochs) == ("hpo", model, dataset, epochs)
    assert (exp.optimizer, exp.amp, exp.size) == ("adamw", True, size)
    assert list(exp.search_space) == ["lr", "batch_size"]  # the order written
    assert exp.search_space["lr"] == pytest.approx(lrs)
    assert exp.search_space["batch_size"] == batches
    assert exp.k == len(lrs) * len(batches)
    assert exp.k == math.prod(len(v) for v in exp.search_space.values())


def test_e16_members_are_the_unifiednn_heterogeneous_group():
    exp = CAT.get("E16")
    assert (exp.type, exp.k, exp.amp, exp.size) == ("multi_model", 3, True, "mixed")
    got = [(m["model"], m["dataset"], m["batch_size"], m["epochs"], m["lr"], m["optimizer"],
            m["optimizer_kwargs"]) for m in exp.members]
    assert got == [
        ("lenet", "mnist", 256, 20, 0.01, "sgd", {"momentum": 0.9}),
        ("resnet18", "cifar10", 128, 100, 0.001, "sgd", {"momentum": 0.9}),
        ("resnet50", "cifar100", 64, 120, 0.002, "sgd", {"momentum": 0.9}),
    ]
    assert exp.models() == ["lenet", "resnet18", "resnet50"]
    assert exp.datasets() == ["mnist", "cifar10", "cifar100"]


def test_e17_members():
    exp = CAT.get("E17")
    assert (exp.type, exp.k, exp.amp, exp.size) == ("multi_model", 3, True, "mixed")
    got = [(m["model"], m["dataset"], m["batch_size"], m["epochs"], m["lr"], m["optimizer"])
           for m in exp.members]
    assert got == [
        ("transformer", "wikitext", 10, 10, 5.0, "sgd"),
        ("xlm_roberta", "sst2", 16, 5, 1e-5, "adam"),
        ("vgg16_cbam", "imagenette", 64, 10, 0.002, "sgd"),
    ]
    assert exp.members[0]["task"] == "language_modeling"


def test_offline_family():
    kinds = {exp_id: CAT.get(exp_id).type for exp_id in OFFLINE_IDS}
    assert kinds == {"D_ens": "ensemble", "D_cv": "cv", "D_hpo": "hpo",
                     "D_mm": "multi_model", "D_reg": "ensemble"}
    for exp_id in OFFLINE_IDS:
        exp = CAT.get(exp_id)
        assert exp.family == "offline" and exp.amp is False and exp.description
        assert set(exp.datasets()) <= {"digits", "wine", "breast_cancer", "diabetes"}
    assert CAT.get("D_hpo").k == 6
    assert CAT.get("D_mm").k == 4
    assert CAT.get("D_mm").members[3]["task"] == "regression"


# --------------------------------------------------------------------------- selection

@pytest.mark.parametrize("selector, expected", [
    ("E01", ["E01"]),
    ("1", ["E01"]),
    (7, ["E07"]),
    ("E08:E10", ["E08", "E09", "E10"]),
    ("E15:", ["E15", "E16", "E17"] + OFFLINE_IDS),
    (":E05", ["E01", "E02", "E03", "E04", "E05"]),
    ("1,4,5", ["E01", "E04", "E05"]),
    (" 1 , 4 ", ["E01", "E04"]),
    ("all", FUGUE_IDS + OFFLINE_IDS),
    ("E03,E01,E03", ["E03", "E01"]),
    ("E10:E12,E09:E11", ["E10", "E11", "E12", "E09"]),
    ("D_hpo:", ["D_hpo", "D_mm", "D_reg"]),
    (["E02", "1,E02", "D_ens"], ["E02", "E01", "D_ens"]),
    ("E05,all", ["E05"] + [e for e in FUGUE_IDS + OFFLINE_IDS if e != "E05"]),
])
def test_select(selector, expected):
    assert CAT.select(selector) == expected


def test_unknown_id_names_the_nearest():
    with pytest.raises(ConfigError, match=r"unknown experiment 'E99' \(did you mean 'E09'\?\)"):
        CAT.select("E01,E99")
    with pytest.raises(ConfigError, match=r"unknown experiment 'D_enz' \(did you mean 'D_ens'\?\)"):
        CAT.select("D_enz")
    with pytest.raises(ConfigError, match="unknown experiment 'E18'"):
        CAT.select("18")
    with pytest.raises(ConfigError, match="unknown experiment 'E18'"):
        CAT.select("E15:E18")


def test_empty_range_and_empty_selection_are_errors():
    with pytest.raises(ConfigError, match="range 'E10:E08' selects no experiment"):
        CAT.select("E10:E08")
    with pytest.raises(ConfigError, match="empty"):
        CAT.select("")
    with pytest.raises(ConfigError, match="empty"):
        CAT.select([])
    with pytest.raises(ConfigError):
        CAT.select([True])


def test_get_unknown_names_the_nearest():
    with pytest.raises(ConfigError, match=r"unknown experiment 'D_cvv' \(did you mean 'D_cv'\?\)"):
        CAT.get("D_cvv")


# --------------------------------------------------------------------------- user files

def _write(tmp_path: Path, text: str, name: str = "experiments.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


OVERRIDE_E05 = """
[experiments.E05]
epochs = 3

[experiments.U_new]
type = "ensemble"
model = "mlp"
dataset = "digits"
k = 2
batch_size = 8
epochs = 1
lr = 0.1
"""


def _assert_override(cat, user_file: Path) -> None:
    e05 = cat.get("E05")
    assert e05.epochs == 3
    base = CAT.get("E05")
    for key in ("type", "model", "dataset", "task", "k", "batch_size", "lr", "optimizer",
                "amp", "size", "family"):
        assert getattr(e05, key) == getattr(base, key), key
    assert cat.ids() == CAT.ids() + ["U_new"]
    assert cat.get("U_new").optimizer == "adamw" and cat.get("U_new").k == 2
    assert e05.source == str(user_file)
    assert cat.sources[-1] == user_file
    assert cat.get("E06") == CAT.get("E06")
    assert CAT.get("E05").epochs == 20  # the built-in catalogue object is untouched


def test_user_file_by_path_overrides_key_by_key_and_appends_new_ids(tmp_path):
    path = _write(tmp_path, OVERRIDE_E05)
    _assert_override(load_catalogue(path), path)


def test_user_file_from_fugue_registry_dir(tmp_path, monkeypatch):
    path = _write(tmp_path, OVERRIDE_E05)
    monkeypatch.setenv("FUGUE_REGISTRY_DIR", str(tmp_path))
    _assert_override(load_catalogue(), path)


def test_fugue_registry_dir_without_a_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FUGUE_REGISTRY_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="FUGUE_REGISTRY_DIR=.*no experiments.toml"):
        load_catalogue()


def test_explicit_file_wins_over_registry_dir(tmp_path, monkeypatch):
    reg = tmp_path / "reg"
    reg.mkdir()
    _write(reg, "[experiments.E05]\nepochs = 9\n")
    monkeypatch.setenv("FUGUE_REGISTRY_DIR", str(reg))
    path = _write(tmp_path, "[experiments.E05]\nepochs = 4\n", "mine.toml")
    assert load_catalogue(path).get("E05").epochs == 4


def test_hpo_search_space_key_that_is_not_a_job_field(tmp_path):
    path = _write(tmp_path, """
[experiments.E12]
search_space = { learning_rate = [0.1, 0.2] }
""")
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    message = str(err.value)
    assert "'learning_rate'" in message and "did you mean 'lr'" in message
    assert str(path) in message and "E12" in message


def test_hpo_search_space_optimizer_kwarg_is_accepted(tmp_path):
    path = _write(tmp_path, """
[experiments.H1]
type = "hpo"
model = "mlp"
dataset = "digits"
batch_size = 16
epochs = 1
optimizer = "sgd"
search_space = { lr = [0.1, 0.01], momentum = [0.0, 0.5, 0.9] }
""")
    assert load_catalogue(path).get("H1").k == 6


@pytest.mark.parametrize("body, pattern", [
    ("[experiments.E05]\nbatch_sise = 8\n", r"unknown key 'batch_sise' \(did you mean 'batch_size'\?\)"),
    ("[experiments.E05]\nlearning_rate = 0.1\n", r"unknown key 'learning_rate' \(did you mean 'lr'\?\)"),
    ("[experiments.E05]\nk = \"three\"\n", r"key 'k' must be an integer, got 'three'"),
    ("[experiments.E05]\nk = true\n", r"key 'k' must be an integer"),
    ("[experiments.E05]\nk = 0\n", r"key 'k' must be an integer >= 1, got 0"),
    ("[experiments.E07]\nk = 1\n", r"cv experiment needs k >= 2"),
    ("[experiments.E05]\nbatch_size = 0\n", r"key 'batch_size' must be >= 1, got 0"),
    ("[experiments.E05]\nepochs = 0\n", r"key 'epochs' must be >= 1, got 0"),
    ("[experiments.E05]\nlr = \"fast\"\n", r"key 'lr' must be a number"),
    ("[experiments.E05]\ntype = \"ensembel\"\n", r"did you mean 'ensemble'"),
    ("[experiments.E05]\nsearch_space = { lr = [0.1] }\n", r"only applies to hpo"),
    ("[experiments.E12]\nsearch_space = {}\n", r"non-empty 'search_space'"),
    ("[experiments.E12]\nsearch_space = { lr = [] }\n", r"'lr' must be a non-empty list"),
    ("[experiments.E12]\nsearch_space = { batch_size = [\"big\"] }\n", r"wrong type"),
    ("[experiments.E12]\nsearch_space = { lr = [0.1], batch_size = [0, 32] }\n",
     r"search_space: key 'batch_size' must be >= 1, got 0"),
    ("[experiments.E16]\nmembers = []\n", r"non-empty 'members'"),
    ("[experiments.M1]\ntype = \"multi_model\"\n"
     "members = [{ model = \"mlp\", dataset = \"digits\", batch_size = 0, epochs = 1, lr = 0.1 }]\n",
     r"members\[0\]: key 'batch_size' must be >= 1, got 0"),
    ("[experiments.M1]\ntype = \"multi_model\"\n"
     "members = [{ model = \"mlp\", dataset = \"digits\", epochs = 1, lr = 0.1 }]\n",
     r"members\[0\]: missing key 'batch_size'"),
    ("[experiments.N1]\ntype = \"ensemble\"\nmodel = \"mlp\"\nk = 2\n", r"missing key 'dataset'"),
    ("[experiments.E05]\nval_fraction = 1.5\n", r"val_fraction"),
    ("[experiments]\nE05 = 3\n", r"experiments.E05 must be a table"),
    ("[experiment.E05]\nk = 2\n", r"unknown key 'experiment' \(did you mean 'experiments'\?\)"),
])
def test_bad_user_file_is_a_config_error_naming_file_and_key(tmp_path, body, pattern):
    path = _write(tmp_path, body)
    with pytest.raises(ConfigError, match=pattern) as err:
        load_catalogue(path)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_malformed_toml_names_file_line_and_column(tmp_path):
    path = _write(tmp_path, "# comment\n[experiments.E05]\nk = = 3\n")
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    assert re.match(rf"{re.escape(str(path))}:3:\d+: invalid TOML", str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_catalogue(tmp_path / "absent.toml")
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"# caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_catalogue(path)


def test_to_dict_is_json_able_and_drops_source(tmp_path):
    import json

    path = _write(tmp_path, OVERRIDE_E05)
    exp = load_catalogue(path).get("E05")
    data = exp.to_dict()
    assert "source" not in data
    assert json.loads(json.dumps(data)) == data
    assert CAT.get("E05").to_dict() != data  # epochs differ
    assert CAT.get("E16").to_dict()["members"][0]["model"] == "lenet"


@pytest.mark.parametrize("body, needle", [
    ('type = "hpo"\nmodel = "mlp"\ndataset = "digits"\nepochs = 1\nk = 3\nsearch_space = { lr = [0.1] }', "'k' does not apply to hpo"),
    ('type = "ensemble"\nmodel = "mlp"\ndataset = "digits"\nk = 2\nbatch_size = 8\nepochs = 1\nlr = -0.1', "'lr' must be > 0"),
    ('type = "multi_model"\nk = 2\nmembers = [{ model = "mlp", dataset = "digits", batch_size = 8, epochs = 1, lr = 0.1 }]', "'k' does not apply to multi_model"),
])
def test_keys_that_would_be_silently_ignored_or_wrong_are_refused(tmp_path, body, needle):
    path = tmp_path / "experiments.toml"
    path.write_text("[experiments.X]\n" + body + "\n")
    with pytest.raises(ConfigError, match=needle):
        load_catalogue(path)


def test_a_multi_model_default_every_member_overrides_is_refused(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text("[experiments.D_mm]\nepochs = 2\n")
    with pytest.raises(ConfigError, match=r"key 'epochs' has no effect: every member"):
        load_catalogue(user)
    user.write_text('[experiments.X]\ntype = "multi_model"\nepochs = 2\nlr = 0.1\n'
                    'members = [{ model = "mlp", dataset = "wine", batch_size = 16 },\n'
                    '  { model = "mlp", dataset = "digits", batch_size = 32, epochs = 3 }]\n')
    members = load_catalogue(user).get("X").members
    assert [m["epochs"] for m in members] == [2, 3]  # a default where a member has none
