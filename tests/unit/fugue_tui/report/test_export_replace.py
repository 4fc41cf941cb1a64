"""Re-exporting into a folder replaces each file in one rename (``fugue_tui.report.export.replaced``):
a reader never finds an earlier export's file missing (the dashboard test once read
``results.tex`` while a loaded machine was still drawing the PNGs of its replacement), an
export that fails midway leaves the earlier files whole, and a link is replaced, never
written through."""

from __future__ import annotations

import pytest

from engine.errors import FugueError
from engine.results.load import load_runs
from fugue_tui.report import export as export_module
from fugue_tui.report.tables import export_results
from tests.snapshots.helpers import FIXTURES


@pytest.fixture(scope="module")
def runs():
    return load_runs(FIXTURES / "harness")


def test_a_failed_re_export_leaves_the_earlier_files_whole(tmp_path, runs, monkeypatch):
    out = tmp_path / "figs"
    first = export_results(runs, out, formats="svg,tex")
    before = {p.name: p.read_bytes() for p in first}
    assert "results.tex" in before and len(before) >= 2
    calls = []

    def broken(figure, path, fmt):
        calls.append(path)
        path.write_text("half")  # a partial file, then the failure
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(export_module, "figure_file", broken)
    with pytest.raises(FugueError, match="No space left on device"):
        export_results(runs, out, formats="svg,tex", overwrite=True)
    # written into the staging folder (fugue_tui.report.export_commit), never in place
    assert calls and all(p.parent.parent == out and p.parent.name.startswith(".export-tmp-")
                         for p in calls)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp file left


def test_a_link_is_replaced_and_a_stale_figure_removed(tmp_path, runs):
    out = tmp_path / "figs"
    out.mkdir()
    outside = tmp_path / "mine.tex"
    outside.write_text("keep me")
    (out / "results.tex").symlink_to(outside)
    stale = out / "energy.svg"  # an earlier export's figure this one does not draw
    stale.write_text("<svg/>")
    written = export_results(runs, out, formats="svg,tex", overwrite=True)
    assert outside.read_text() == "keep me"
    tex = out / "results.tex"
    assert not tex.is_symlink() and r"\toprule" in tex.read_text()
    assert stale not in written and not stale.exists()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
