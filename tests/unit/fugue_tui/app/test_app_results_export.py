"""The export flow's question (fugue_tui.app.screens.results_export)."""

from pathlib import Path

from fugue_tui.app.screens.results_export import replace_question


def test_replace_question_names_three_and_counts_the_rest():
    present = [Path(f"/x/f{i}.png") for i in range(5)]
    q = replace_question("out", present)
    assert q == "out already holds f0.png, f1.png, f2.png and 2 more (an earlier export?). Replace them?"
    assert replace_question("o", present[:1]) == "o already holds f0.png (an earlier export?). Replace them?"
