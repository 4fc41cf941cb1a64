"""fugue-tui front ends: the command line, the headless batch mode and the dashboard.

Depends on ``engine``; the engine never imports this package.
"""

from engine import __version__

__all__ = ["__version__"]
