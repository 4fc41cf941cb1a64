"""``--batch`` piped printed every job's every epoch (issue 49: 1,768 lines for the quick
campaign): ``-q`` prints each cell's lines and the report only, ``-v`` today's detail,
which stays the default. Events as the runner and a cell write them, through
:class:`fugue_tui.console.plain.PlainProgress`; the flags through the real parser."""

from __future__ import annotations

import contextlib
import io

import pytest
from rich.console import Console

from fugue_tui.cli import build_parser, main
from fugue_tui.console.batch import make_progress
from fugue_tui.console.plain import PlainProgress

KEY = "1e521000aaaabbbb"


def _events():
    def runner(kind, **fields):
        return {"type": kind, "campaign": "quick", "ts": 0.0, **fields}

    def cell(kind, **fields):
        return {"type": kind, "cell": KEY, "attempt": 1, "ts": 0.0, **fields}

    out = [runner("campaign_started", cells=1, run_dir="runs/quick", device="cpu",
                  runner_pid=1, resume=False),
           runner("queued", cell=KEY, index=1, label="D_ens seq pass 1"),
           runner("cell_started", cell=KEY, index=1, label="D_ens seq pass 1", attempt=1),
           cell("started", pid=2, exp_id="D_ens", executor="seq", jobs=["j0", "j1"]),
           cell("phase", phase="setup", seconds=0.5)]
    for job in ("j0", "j1"):
        out.append(cell("job_started", job_id=job))
        for epoch in (1, 2, 3):
            out.append(cell("job_progress", job_id=job, epoch=epoch, epochs=3, step=10,
                            steps=10, samples=100, loss=0.5, elapsed=1.0, val_loss=0.4,
                            val_acc=0.8, epoch_end=True))
        out.append(cell("job_done", job_id=job, status="ok", error="", total_time_s=3.0,
                        samples=300, final_val_acc=0.8))
    out += [cell("summary", group_id="g", status="ok", error="", T_group=1.0,
                 total_samples=600, throughput_group=600.0, setup_s=0.5, data_load_s=0.1,
                 warnings=[], jobs=2),
            runner("done", cell=KEY, attempt=1, exit_code=0, error=""),
            runner("campaign_done", ok=True, exit_code=0, failed=0)]
    return out


def _lines(quiet: bool) -> list[str]:
    out = io.StringIO()
    with PlainProgress(1, stream=out, quiet=quiet) as plain:
        for event in _events():
            plain(event)
    return out.getvalue().splitlines()


def test_quiet_keeps_the_cell_lines_and_drops_job_and_epoch_lines():
    full, quiet = _lines(False), _lines(True)
    epochs = [line for line in full if "epoch" in line]
    assert len(epochs) == 6  # today's detail: every job's every epoch
    assert not [line for line in quiet if "epoch" in line or "j0" in line or "j1" in line]
    assert quiet[0].startswith("campaign quick: 1 cells")
    assert "[1/1] D_ens seq pass 1 (attempt 1)" in quiet
    assert any("T_group 1.00 s" in line for line in quiet)  # the cell's own result
    assert [line for line in full if line in quiet] == quiet  # only ever fewer lines


def test_flags_parse_and_default_keeps_todays_detail():
    parser = build_parser()
    assert parser.parse_args(["--batch", "c.toml"]).detail is None
    assert parser.parse_args(["--batch", "c.toml", "-q"]).detail == "quiet"
    assert parser.parse_args(["--batch", "c.toml", "--verbose"]).detail == "verbose"
    terminal = Console(file=io.StringIO(), force_terminal=True)
    assert make_progress(1, terminal, {}, quiet=True).quiet  # no live view with -q
    piped = make_progress(1, Console(file=io.StringIO()), {})
    assert isinstance(piped, PlainProgress) and not piped.quiet


@pytest.mark.parametrize("argv, words", [
    (["-q", "list"], "--quiet only applies with --batch"),
    (["--batch", "c.toml", "-q", "-v"], "not allowed with argument"),
    (["--batch", "c.toml", "-q", "--json"], "--quiet applies to --batch's progress lines"),
    (["--batch", "c.toml", "-v", "--dry-run"], "--verbose applies to --batch's progress"),
])
def test_misused_detail_flags_are_one_line_and_exit_2(argv, words):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(argv) == 2
    assert words in err.getvalue()


def test_the_quiet_flag_reaches_the_batch_run(monkeypatch):
    import fugue_tui.console.batch as console_batch

    seen = {}
    monkeypatch.setattr(console_batch, "run_batch",
                        lambda *a, **k: seen.update(k) or 0)
    assert main(["--batch", "c.toml", "-q"]) == 0
    assert seen["quiet"] is True
    assert main(["--batch", "c.toml"]) == 0
    assert seen["quiet"] is False
