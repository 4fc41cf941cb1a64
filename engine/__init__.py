"""fugue-tui measurement engine.

Never imports Textual, Rich or plotext, and keeps torch out of module level in every module
the runner and the dashboard use (``import torch`` loads ``torch.cuda``; a process that
touched CUDA must not fork cells). Modules that need torch import it inside functions (the
parts' builders and loaders in ``engine.parts``), or are only imported inside a cell or a
worker process (``engine.cell.main``, ``engine.train``, the executors' implementations
under ``engine.executors``). The rules are import contracts: ``pyproject.toml``.
"""

__version__ = "0.1.0"
