"""The dashboard's long-lived heap (its imports, the app; pandas once the strip loaded it)
is kept out of the garbage collector's full collections (issue 47, item 2: each walked it
all again, a few a minute, more as the campaign went on)."""

from __future__ import annotations

import gc

from fugue_tui.app.models.run import freeze_heap
from fugue_tui.app.models.so_far import SoFar


def test_the_strip_freezes_what_its_analysis_imported_once(tmp_path):
    SoFar(tmp_path, "c")  # imports the analysis (pandas) and freezes the heap then
    frozen = gc.get_freeze_count()
    assert frozen > 10_000  # the imports at least
    assert not freeze_heap("analysis")  # once per process
    SoFar(tmp_path, "d")
    assert gc.get_freeze_count() == frozen
