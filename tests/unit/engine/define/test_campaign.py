"""Campaign files (``engine.define.campaign``) and the cell matrix (``engine.define.matrix``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.define.campaign import load_campaign
from engine.define.matrix import build_cells
from engine.errors import ConfigError
from engine.executors import ExecutorSpec, register_executor
from engine.plugins import load_builtins
from engine.registry import EXECUTORS

REPO = Path(__file__).resolve().parents[4]
MACHINE = {"host": "h1", "device": "cpu", "gpu_uuid": "", "gpu_name": "", "torch": "2.x"}


def _campaign(tmp_path: Path, text: str, name: str = "c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def second_executor():
    """A second executor declared through the plugin API, so executor order can be seen.

    Cells are only planned here, never run, so its target is never imported."""
    load_builtins()
    assert "zz_test" not in EXECUTORS
    register_executor(ExecutorSpec(name="zz_test", label="Test", color="#000000",
                                   target="not_a_module:NotAClass",
                                   options={"workers": (int,)}))
    yield "zz_test"
    EXECUTORS.items.pop("zz_test", None)


# --------------------------------------------------------------------------- parsing

def test_quick_campaign():
    c = load_campaign(REPO / "campaigns" / "quick.toml")
    assert c.name == "quick"
    assert c.experiments == ["D_ens", "D_cv", "D_hpo", "D_mm", "D_reg"]
    assert (c.executors, c.passes, c.seed, c.device, c.compile) == (
        ["seq", "unified_model", "mp", "ray"], 1, 42, "auto", "off")
    assert c.runs_dir == Path("runs")
    assert len(c.file_hash) == 16
    assert len(build_cells(c, MACHINE)) == 5 * 4  # ray's default scheduler on D_hpo: fifo


def test_defaults_and_name_from_file_stem(tmp_path):
    c = load_campaign(_campaign(tmp_path, 'experiments = "E08:E10,D_ens"\n', "my-run.toml"))
    assert c.name == "my-run"
    assert c.experiments == ["E08", "E09", "E10", "D_ens"]
    assert (c.executors, c.passes, c.seed, c.compile, c.compile_mode, c.threads) == (
        ["seq"], 1, 42, "off", "default", 0)
    assert c.compile_modes() == ["off"]


def test_overrides_replace_file_values(tmp_path):
    path = _campaign(tmp_path, 'experiments = "D_ens"\npasses = 3\nseed = 1\n')
    c = load_campaign(path, {"passes": 2, "seed": None, "runs_dir": "elsewhere"})
    assert (c.passes, c.seed, c.runs_dir) == (2, 1, Path("elsewhere"))
    with pytest.raises(ConfigError, match="'passes' must be between 1 and 1000, got 0"):
        load_campaign(path, {"passes": 0})


def test_experiments_file_is_relative_to_the_campaign(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "mine.toml").write_text(
        '[experiments.U1]\ntype = "ensemble"\nmodel = "mlp"\ndataset = "digits"\n'
        'k = 2\nbatch_size = 8\nepochs = 1\nlr = 0.1\n')
    c = load_campaign(_campaign(sub, 'experiments = "U1,D_ens"\nexperiments_file = "mine.toml"\n'))
    assert c.experiments == ["U1", "D_ens"]
    assert c.catalogue.get("U1").k == 2


@pytest.mark.parametrize("body, pattern", [
    ('experiments = "D_ens"\npases = 2\n', r"unknown key 'pases' \(did you mean 'passes'\?\)"),
    ('experiments = "D_ens"\nexecutors = ["sequ"]\n',
     r"unknown executor 'sequ' \(did you mean 'seq'\?\); known: .*seq"),
    ('experiments = "D_ens"\nexecutors = ["ray2000"]\n', r"unknown executor 'ray2000'.*known: .*seq"),
    ('experiments = "D_ens"\nexecutors = []\n', r"at least one executor; known: .*seq"),
    ('experiments = "D_enz"\n', r"unknown experiment 'D_enz' \(did you mean 'D_ens'\?\)"),
    ('experiments = "E10:E08"\n', r"range 'E10:E08' selects no experiment"),
    ('executors = ["seq"]\n', r"missing key 'experiments'"),
    ('experiments = "D_ens"\npasses = 0\n', r"key 'passes' must be between 1 and 1000, got 0"),
    ('experiments = "D_ens"\npasses = "2"\n', r"key 'passes' must be an integer, got '2'"),
    ('experiments = "D_ens"\npasses = true\n', r"key 'passes' must be an integer"),
    ('experiments = "D_ens"\nseed = 1.5\n', r"key 'seed' must be an integer"),
    ('experiments = "D_ens"\ncompile = "maybe"\n', r"key 'compile' must be one of off, on, both, got 'maybe'"),
    ('experiments = "D_ens"\ncompile_mode = "fast"\n', r"key 'compile_mode' must be one of"),
    ('experiments = "D_ens"\ndevice = "gpu0"\n', r"key 'device' must be auto, cpu, cuda or cuda:N, got 'gpu0'"),
    ('experiments = "D_ens"\ndevice = "cuda:x"\n', r"key 'device'"),
    ('experiments = "D_ens"\nthreads = -1\n', r"key 'threads' must be >= 0"),
    ('experiments = "D_ens"\nname = "a b"\n', r"key 'name' must be 1 to 128 letters, digits"),
    ('experiments = "D_ens"\n[options.nope]\nx = 1\n', r"options.nope: unknown executor"),
    ('experiments = "D_ens"\noptions = { seq = 3 }\n', r"options.seq must be a table"),
    ('experiments = "D_ens"\n[options.seq]\nworkers = 2\n', r"options.seq: unknown key 'workers'"),
    ('experiments = "D_ens"\nrunsdir = "x"\n', r"unknown key 'runsdir' \(did you mean 'runs_dir'\?\)"),
])
def test_bad_campaign_is_a_one_line_config_error(tmp_path, body, pattern):
    path = _campaign(tmp_path, body)
    with pytest.raises(ConfigError, match=pattern) as err:
        load_campaign(path)
    assert "\n" not in str(err.value)
    assert str(path) in str(err.value)


def test_missing_experiments_file_is_named(tmp_path):
    path = _campaign(tmp_path, 'experiments = "D_ens"\nexperiments_file = "absent.toml"\n')
    absent = re.escape(str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: key 'experiments_file': "
                                          rf"no such file {absent}$"):
        load_campaign(path)


def test_malformed_campaign_names_line_and_column(tmp_path):
    path = _campaign(tmp_path, 'name = "x"\nexperiments = "D_ens"\npasses = = 2\n')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:3:\d+: invalid TOML"):
        load_campaign(path)
    # an error at the end of the file (tomllib gives no position for it) gets one too
    path = _campaign(tmp_path, 'name = "x"\nexperiments = [\n', "eof.toml")
    with pytest.raises(ConfigError,
                       match=rf"^{re.escape(str(path))}:3:1: invalid TOML: .*end of file"):
        load_campaign(path)


def test_executor_options_are_checked_against_the_declaration(tmp_path, second_executor):
    ok = load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\nexecutors = ["zz_test"]\n'
                                            '[options.zz_test]\nworkers = 2\n'))
    assert ok.options == {"zz_test": {"workers": 2}}
    with pytest.raises(ConfigError, match=r"options.zz_test: key 'workers' must be an integer"):
        load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\n[options.zz_test]\n'
                                          'workers = "2"\n'))


# --------------------------------------------------------------------------- the matrix

def test_build_cells_order(tmp_path, second_executor):
    c = load_campaign(_campaign(tmp_path, """
experiments = "D_cv,D_ens"
executors = ["zz_test", "seq"]
passes = 2
compile = "both"
compile_mode = "max-autotune"
"""))
    assert c.executors == ["zz_test", "seq"]
    assert c.compile_modes() == ["off", "max-autotune"]
    cells = build_cells(c, MACHINE)
    expected = [(p, e, x, m) for p in (1, 2) for e in ("D_cv", "D_ens")
                for x in ("zz_test", "seq") for m in ("off", "max-autotune")]
    assert [(cl.pass_index, cl.exp_id, cl.executor, cl.compile_mode) for cl in cells] == expected
    assert [cl.index for cl in cells] == list(range(1, 17))
    assert len({cl.key for cl in cells}) == 16
    assert cells[0].slug == "001-D_cv-zz_test-p1"
    assert cells[1].slug == "002-D_cv-zz_test-cmax-autotune-p1"
    assert cells[1].label == "D_cv zz_test compile=max-autotune pass 1"
    assert [j["job_id"] for j in cells[0].jobs] == [f"D_cv_fold{i}" for i in range(5)]
    assert cells[0].experiment["id"] == "D_cv"


def test_compile_on_uses_only_the_compile_mode(tmp_path):
    c = load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\ncompile = "on"\n'))
    assert [cl.compile_mode for cl in build_cells(c, MACHINE)] == ["default"]


def test_cell_keys_stable_across_loads(tmp_path):
    path = _campaign(tmp_path, 'experiments = "D_ens,D_hpo"\npasses = 2\n')
    a = [cl.key for cl in build_cells(load_campaign(path), MACHINE)]
    b = [cl.key for cl in build_cells(load_campaign(path), dict(MACHINE))]
    assert a == b
    assert all(len(k) == 16 and int(k, 16) >= 0 for k in a)


def test_cell_keys_ignore_comments_whitespace_and_key_order(tmp_path):
    plain = _campaign(tmp_path, 'experiments = "D_ens,D_cv"\nseed = 7\npasses = 2\n', "a.toml")
    noisy = _campaign(tmp_path, '# a comment\n\nseed   =   7   # inline\n\npasses = 2\n'
                                'experiments = "D_ens,D_cv"\n', "b.toml")
    ca, cb = load_campaign(plain), load_campaign(noisy)
    assert ca.file_hash != cb.file_hash
    assert [cl.key for cl in build_cells(ca, MACHINE)] == [cl.key for cl in build_cells(cb, MACHINE)]


def test_cell_keys_differ_with_seed_pass_and_machine(tmp_path):
    base = [cl.key for cl in build_cells(
        load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\npasses = 2\n', "a.toml")),
        MACHINE)]
    assert base[0] != base[1]  # pass 1 vs pass 2
    reseeded = [cl.key for cl in build_cells(
        load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\npasses = 2\nseed = 43\n',
                                "b.toml")), MACHINE)]
    assert not set(base) & set(reseeded)
    c = load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\npasses = 2\n', "c.toml"))
    for change in ({"host": "h2"}, {"gpu_uuid": "GPU-1"}, {"torch": "2.y"}, {"device": "cuda"}):
        moved = [cl.key for cl in build_cells(c, {**MACHINE, **change})]
        assert not set(base) & set(moved), change


def test_cell_keys_change_with_the_experiment_definition(tmp_path):
    (tmp_path / "mine.toml").write_text("[experiments.D_ens]\nepochs = 3\n")
    base = build_cells(load_campaign(_campaign(tmp_path, 'experiments = "D_ens"\n', "a.toml")),
                       MACHINE)
    changed = build_cells(load_campaign(_campaign(
        tmp_path, 'experiments = "D_ens"\nexperiments_file = "mine.toml"\n', "b.toml")), MACHINE)
    assert base[0].key != changed[0].key
    assert changed[0].jobs[0]["epochs"] == 3
