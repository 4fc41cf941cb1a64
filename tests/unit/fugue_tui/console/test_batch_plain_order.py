"""Plain ``--batch`` output keeps control messages in order (fresh-user finding 11): with
``control ... skip 6e52`` sent twice while cell 3 ran, ``[5/6] my_cv mp pass 1: skipped``
was printed before ``[4/6]`` started, and the duplicate's "ignored" notice sat indented
under [4/6] as if about it. Events as the runner writes them (its ``runner.jsonl`` types
and fields), through :class:`fugue_tui.console.plain.PlainProgress`."""

from __future__ import annotations

import io

from fugue_tui.console.plain import PlainProgress

LABELS = {1: "my_ens seq pass 1", 2: "my_ens mp pass 1", 3: "my_cv seq pass 1",
          4: "my_cv unified_model pass 1", 5: "my_cv mp pass 1", 6: "my_cv ray pass 1"}
KEY = {i: f"{i}e52{i}000aaaabbbb" for i in LABELS}
KEY[5] = "6e52aaaabbbbcccc"


def _r(kind, **fields):
    return {"type": kind, "campaign": "mine3", "ts": 0.0, **fields}


def _events():
    out = [_r("campaign_started", cells=6, run_dir="runs/mine3", device="cpu", runner_pid=1,
              resume=False)]
    out += [_r("queued", cell=KEY[i], index=i, label=LABELS[i]) for i in LABELS]
    for i in (1, 2, 3):
        out.append(_r("cell_started", cell=KEY[i], index=i, label=LABELS[i], attempt=1))
        out.append({"type": "summary", "cell": KEY[i], "attempt": 1, "ts": 0.0,
                    "T_group": 1.0, "status": "ok"})
        if i == 3:  # while cell 3 ran: skip 6e52, and once more
            out += [_r("skipped", cell=KEY[5], index=5, label=LABELS[5],
                       reason="skipped by control command"),
                    _r("control", cmd="skip", cell=KEY[5], applied=True),
                    _r("control", cmd="skip", cell=KEY[5], applied=False,
                       reason="not applicable to the cell's current state")]
    for i in (4, 6):
        out.append(_r("cell_started", cell=KEY[i], index=i, label=LABELS[i], attempt=1))
    out.append(_r("campaign_done", ok=False, exit_code=1, failed=0))
    return out


def _lines(events):
    out = io.StringIO()
    with PlainProgress(6, stream=out) as plain:
        for event in events:
            plain(event)
    return out.getvalue().splitlines()


def test_a_control_skip_is_printed_in_its_turn_and_control_lines_name_their_cell():
    lines = _lines(_events())
    starts = [line for line in lines if line.startswith("[")]
    assert [s.split("]")[0] + "]" for s in starts] == [
        "[1/6]", "[2/6]", "[3/6]", "[4/6]", "[5/6]", "[6/6]"]
    assert starts[4] == "[5/6] my_cv mp pass 1: skipped, skipped by control command"
    control = [line for line in lines if line.startswith("control ")]
    assert control == [
        "control skip [5/6] my_cv mp pass 1: applied",
        "control skip [5/6] my_cv mp pass 1: ignored (not applicable to the cell's current "
        "state)"]
    # said when it happened (while cell 3 ran), before [4/6] started
    assert lines.index(control[1]) < lines.index(starts[3])


def test_held_lines_are_printed_when_the_campaign_stops_early():
    events = [e for e in _events() if e["type"] not in ("campaign_done",)
              and not (e["type"] == "cell_started" and e["index"] in (4, 6))]
    lines = _lines(events)  # Ctrl-C after cell 3: no later start, no campaign_done
    assert lines[-1] == "[5/6] my_cv mp pass 1: skipped, skipped by control command"
