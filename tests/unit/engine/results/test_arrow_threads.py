"""Reading the results files when Arrow cannot start its threads (``ulimit -u 5``: the
closing report once crashed with Arrow's thread error, issue 43). The limit cannot be set
for root in a test (RLIMIT_NPROC does not bind it), so Arrow's reader fails here as it
does then, for the threaded read only: the rows come back the same, read on this thread."""

from __future__ import annotations

import pyarrow.csv as pcsv

from engine.results.columns import GROUP_COLUMNS
from engine.results.load import load_runs
from engine.results.store import append_rows


def test_no_reader_threads_falls_back_to_a_single_threaded_read(tmp_path, monkeypatch):
    rows = [{"group_id": f"seq_{i}", "exp_id": "D_ens", "executor": "seq", "T_group": 1.5,
             "status": "ok", "K": 2} for i in range(3)]
    append_rows(tmp_path / "master_groups.csv", rows, GROUP_COLUMNS)
    expected = load_runs(tmp_path).groups
    real, calls = pcsv.read_csv, []

    def no_threads(*args, read_options=None, **kwargs):
        calls.append(read_options.use_threads if read_options else True)
        if read_options is None or read_options.use_threads:
            raise RuntimeError("thread constructor failed: Resource temporarily unavailable")
        return real(*args, read_options=read_options, **kwargs)

    monkeypatch.setattr(pcsv, "read_csv", no_threads)
    got = load_runs(tmp_path).groups
    assert calls[:2] == [True, False]  # tried with threads, then read on this thread
    assert got["group_id"].tolist() == expected["group_id"].tolist() == ["seq_0", "seq_1",
                                                                          "seq_2"]
    assert got.equals(expected)
