"""``python -m engine.cell SPEC.json``: one cell (see :mod:`engine.cell.main`)."""

import contextlib
import os
import sys

from engine.cell.main import main
from engine.cell.output import TolerantStream

sys.stdout, sys.stderr = TolerantStream(sys.stdout), TolerantStream(sys.stderr)
code = main()
for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(OSError, ValueError):  # a log on a full disk
        stream.flush()
# Everything the cell owes is on disk (rows locked+fsync'ed, events closed, the monitor
# and the executor stopped). A normal interpreter exit with torch loaded then spends
# 1-5 s in atexit handlers and module teardown, which every cell of a campaign would pay
# for nothing: leave at once.
os._exit(code)
