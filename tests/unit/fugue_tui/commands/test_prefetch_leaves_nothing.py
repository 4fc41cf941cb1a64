"""``prefetch --data-dir NEW`` that fetches nothing removes the folders it created
(fresh-user finding 15: offline, it exited 2 correctly but left the empty data dir
behind). A folder that existed before stays (test_commands' offline prefetch checks that
one). On the real CLI,
offline whatever this machine has (every URL through a proxy that refuses)."""

from __future__ import annotations

from tests.unit.fugue_tui.commands.test_commands import _offline, fugue


def test_offline_prefetch_removes_the_data_dir_it_created(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    data = tmp_path / "new" / "deeper" / "data"
    result = fugue(workdir, "prefetch", "E05", "--data-dir", str(data), env=_offline(tmp_path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "cal_housing: download failed (no network?)" in result.stdout
    assert not (tmp_path / "new").exists()  # the whole chain it made, not only the leaf

