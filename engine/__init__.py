"""fugue-tui measurement engine.

Never imports Textual, Rich or plotext, and keeps torch out of module level in every module
the runner and the dashboard use (``import torch`` loads ``torch.cuda``; a process that
touched CUDA must not fork cells). Modules that need torch import it inside functions, or
are only imported from inside a cell process (``engine.cell.main``, ``engine.train.loop``,
``engine.executors.*``, ``engine.parts.models``, ``engine.parts.datasets``).
"""

__version__ = "0.1.0"
