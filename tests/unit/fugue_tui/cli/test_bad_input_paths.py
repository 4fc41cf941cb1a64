"""The bad-input contract (tests/unit/fugue_tui/cli/test_bad_input_matrix.py) for every place where user
text becomes a path: the campaign name (the run folder ``<runs_dir>/<name>/``), the runs
folder (``runs_dir``, ``--runs-dir``), the ad-hoc ``--name`` and experiment ids (cell folder
names), and the folder of ``report --export``. Each row: exit 2, one line naming the file,
key or value, nothing written.

Rows that would run a campaign if the bad input were accepted use ``--dry-run``, so that a
regression fails fast (exit 0) instead of training; the checks they prove happen while the
campaign loads, which the real run shares (one row runs without it to show that).
"""

from __future__ import annotations

import pytest

from tests.unit.fugue_tui.cli import test_bad_input_matrix as matrix
from tests.unit.fugue_tui.cli.test_bad_input_matrix import DIR, Case, _case_id

HARNESS = matrix.REPO / "tests" / "fixtures" / "fugue-harness-cpu"
#: A runs folder with the fugue harness's rows (so that ``report`` has something to export).
_RUNS = {f"runs/{name}": (HARNESS / name).read_text()
         for name in ("master_groups.csv", "master_individual.csv")}
#: One tiny experiment, so that a row that wrongly passes validation trains for a second.
_TINY = ('[experiments.T]\ntype = "ensemble"\nmodel = "mlp"\ndataset = "wine"\nk = 1\n'
         'batch_size = 8\nepochs = 1\nlr = 0.01\n')
_DRY = ("--batch", "c.toml", "--dry-run")


def _dry(body: str, *needles: str, id: str, extra: dict | None = None,
         flags: tuple[str, ...] = (), names_campaign: bool = True) -> Case:
    """A campaign ``c.toml`` listed with ``--dry-run`` (plus ``flags``)."""
    return Case(id, {"c.toml": body, **(extra or {})}, (*_DRY, *flags),
                (("c.toml",) if names_campaign else ()) + needles)


CASES: list[Case | object] = [
    # ------------------------------------------------------------------ the campaign name
    Case("name-dotdot-real-run", {"c.toml": 'name = ".."\nexperiments = "T"\n'
                                  'experiments_file = "mine.toml"\n', "mine.toml": _TINY},
         ("--batch", "c.toml"), ("c.toml", "key 'name'", "'..'", "letters, digits")),
    _dry('name = ".."\nexperiments = "D_ens"\n', "key 'name'", "'..'", id="name-dotdot"),
    _dry('name = "."\nexperiments = "D_ens"\n', "key 'name'", "'.'", id="name-dot"),
    _dry('name = ".hidden"\nexperiments = "D_ens"\n', "key 'name'", "'.hidden'",
         "starting with a letter or digit", id="name-leading-dot"),
    _dry('name = "samples"\nexperiments = "D_ens"\n', "key 'name'", "'samples'", "reserved",
         id="name-reserved-samples"),
    _dry('name = "master_groups.csv"\nexperiments = "D_ens"\n', "key 'name'",
         "'master_groups.csv'", "reserved", id="name-reserved-results-file"),
    _dry('name = ""\nexperiments = "D_ens"\n', "key 'name'", "empty", id="name-empty"),
    Case("name-from-unsafe-file-name", {"my campaign.toml": 'experiments = "D_ens"\n'},
         ("--batch", "my campaign.toml", "--dry-run"),
         ("my campaign.toml", "file name 'my campaign'", "key 'name'")),
    # ------------------------------------------------------------------ experiment ids
    # (a cell's folder is cells/<NNN>-<experiment id>-<executor>-p<pass>-<key8>)
    Case("experiment-id-escapes-the-run-folder",
         {"c.toml": 'experiments = ["a/../../../../../escaped"]\n'
                    'experiments_file = "mine.toml"\n',
          "mine.toml": _TINY.replace("[experiments.T]",
                                     '[experiments."a/../../../../../escaped"]')},
         _DRY, ("mine.toml", "experiment id", "'a/../../../../../escaped'")),
    Case("experiment-id-with-space-in-registry-dir",
         {"c.toml": 'experiments = "D_ens"\n',
          "reg/experiments.toml": _TINY.replace("[experiments.T]", '[experiments."my exp"]')},
         _DRY, ("reg/experiments.toml", "experiment id", "'my exp'"),
         env={"FUGUE_REGISTRY_DIR": "{cwd}/reg"}),
    Case("adhoc-name-dotdot", {},
         ("run", "--model", "mlp", "--dataset", "wine", "--name", "..", "--dry-run"),
         ("--name", "'..'", "letters, digits")),
    Case("adhoc-name-empty", {},
         ("run", "--model", "mlp", "--dataset", "wine", "--name", "", "--dry-run"),
         ("--name", "empty")),
    # ------------------------------------------------------------------ the runs folder
    _dry('experiments = "D_ens"\nruns_dir = ""\n', "key 'runs_dir'", "empty",
         id="runs-dir-empty"),
    _dry('experiments = "D_ens"\n', "argument --runs-dir", "empty", flags=("--runs-dir", ""),
         names_campaign=False, id="flag-runs-dir-empty"),
    Case("run-runs-dir-empty", {}, ("run", "--exp", "D_ens", "--runs-dir", "", "--dry-run"),
         ("--runs-dir", "empty")),
    _dry('experiments = "D_ens"\nruns_dir = "~no_such_user_fugue/x"\n', "key 'runs_dir'",
         "'~no_such_user_fugue/x'", "cannot expand", id="runs-dir-unknown-user"),
    _dry('experiments = "D_ens"\n', "afile", "not a directory", flags=("--runs-dir", "afile"),
         extra={"afile": "a regular file\n"}, names_campaign=False,
         id="dry-run-runs-dir-is-a-file"),
    _dry('experiments = "D_ens"\nruns_dir = "afile/runs"\n', "afile/runs", "regular file",
         extra={"afile": "a regular file\n"}, names_campaign=False,
         id="dry-run-runs-dir-under-a-file"),
    # os.access says yes to root under /proc; the real run's mkdir fails there
    _dry('experiments = "D_ens"\n', "/proc/fugue-tui-nope", "cannot be created",
         flags=("--runs-dir", "/proc/fugue-tui-nope"), names_campaign=False,
         id="dry-run-runs-dir-in-proc"),
    Case("run-dry-run-runs-dir-is-a-file", {"afile": "a regular file\n"},
         ("run", "--exp", "D_ens", "--runs-dir", "afile", "--dry-run"),
         ("afile", "not a directory")),
    # ------------------------------------------------------------------ report --export
    Case("report-export-to-a-regular-file", {**_RUNS, "afile": "keep me\n"},
         ("report", "runs", "--export", "afile"),
         ("--export", "'afile'", "not a folder")),
    Case("report-export-under-a-regular-file", {**_RUNS, "afile": "keep me\n"},
         ("report", "runs", "--export", "afile/figs"),
         ("--export", "'afile/figs'", "regular file 'afile'")),
    Case("report-export-would-overwrite", {**_RUNS, "figs": DIR, "figs/results.tex": "mine\n"},
         ("report", "runs", "--export", "figs", "--format", "tex"),
         ("--export 'figs' already holds results.tex", "--overwrite")),
    Case("report-export-empty", _RUNS, ("report", "runs", "--export", ""),
         ("--export", "empty")),
    # ------------------------------------------------------------------ prefetch
    Case("prefetch-data-dir-empty", {}, ("prefetch", "D_ens", "--data-dir", ""),
         ("--data-dir", "empty")),
]


def test_ids_are_unique_and_new():
    ids = [_case_id(c) for c in CASES]
    assert len(ids) == len(set(ids))
    assert not set(ids) & {_case_id(c) for c in matrix.CASES}


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_path_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case: Case):
    matrix.test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case)
