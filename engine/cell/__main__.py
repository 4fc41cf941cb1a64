"""``python -m engine.cell SPEC.json``: one cell (see :mod:`engine.cell.main`).

``python -m engine.cell --zygote FD``: the pre-warmed parent that forks a runner's cells
(:mod:`engine.cell.zygote`); each forked cell comes back here and runs exactly as
``python -m engine.cell SPEC.json`` does, ``__main__`` included (this module, as it is for
a cell started the old way).
"""

import contextlib
import os
import sys

from engine.cell.protocol import ZYGOTE_FLAG

start = "spawn"
if sys.argv[1:2] == [ZYGOTE_FLAG]:
    from engine.cell.zygote import serve

    serve(sys.argv[2:])  # returns only in a forked cell, whose sys.argv is then its own
    start = "zygote"

from engine.cell.main import main  # noqa: E402 - after the zygote's fork, like any cell
from engine.cell.output import TolerantStream  # noqa: E402 - idem

sys.stdout, sys.stderr = TolerantStream(sys.stdout), TolerantStream(sys.stderr)
code = main(start=start)
for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(OSError, ValueError):  # a log on a full disk
        stream.flush()
# Everything the cell owes is on disk (rows locked+fsync'ed, events closed, the monitor
# and the executor stopped). A normal interpreter exit with torch loaded then spends
# 1-5 s in atexit handlers and module teardown, which every cell of a campaign would pay
# for nothing: leave at once.
os._exit(code)
