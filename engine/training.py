"""Compatibility for plugins: the training loop moved to :mod:`engine.train.loop`.

An executor plugin written before the re-layout (``from engine.training import train_job``)
keeps loading; new code imports :mod:`engine.train.loop`. Imports torch (as the loop does).
"""

from engine.train.loop import JobResult, TrainSettings, train_job  # noqa: F401
