"""The ``fugue-tui`` sub-commands, one module per command, each with its arguments
(``add_parser(sub)``) and its handler (``run(args)``); :mod:`fugue_tui.cli` assembles the
parser from them and dispatches. ``list`` (:mod:`.listing`), ``control``, ``report``,
``bench``, ``completion``, ``profile``/``simulate`` (:mod:`.profile`), and the top level's
``--batch`` with its campaign overrides (:mod:`.batch`); the shared parser class and value
types in :mod:`.arguments`. The dashboard's parser stays in :mod:`fugue_tui.cli`: it imports
``fugue_tui.app``, which imports :mod:`.common` (a sibling cycle otherwise).

* :mod:`.validate`: ``validate [SELECTOR]``, every catalogue experiment (or the selected ones)
  and whether it can run on this machine, with a one-line reason when not; then what is
  registered (models, datasets, tasks, optimizers, executors, workload types, plugins). Exit 0
  for the listing; with a selector, 1 when a selected experiment cannot run here.
* :mod:`.prefetch`: ``prefetch [SELECTOR] [--data-dir DIR]``, download the datasets of the
  selected experiments (default all) into the data root, each into a temporary folder inside
  it that is renamed into place only once complete. Exit 2 when a dataset could not be
  fetched. The downloaders themselves are in :mod:`.downloads`.
* :mod:`.run`: ``run``, the harness's non-interactive form. It builds a campaign in memory
  (and, for an experiment described on the command line, an experiments file merged over the
  catalogue: ``engine.define.adhoc``), validates both exactly as a campaign file is validated,
  writes them to ``<runs_dir>/.adhoc/run-<selection>-<digest>.toml`` (named after their
  content: :func:`.run_campaign.campaign_name`) and runs them through
  :func:`fugue_tui.console.batch.run_batch`, the code behind ``--batch``. Every usage error is one
  line, exit 2, with nothing written. Its flags and ``--help`` epilog are in
  :mod:`.run_flags`; naming, writing and checking the generated files in
  :mod:`.run_campaign`.
* :mod:`.models`: ``models RUN_FOLDER [--json]``, the trained models a run folder (a cell,
  an attempt) kept under ``save_models``, read from their JSON without importing torch
  (:mod:`engine.models.listing`). Exit 0, also when none were kept; 2 for a folder that is
  no run folder.
* :mod:`.common`: the helpers they share.

Torch-free at import (prefetch imports torchvision / scikit-learn inside the downloaders).
Nothing is re-exported here: import each command from its module
(``from fugue_tui.commands.run import run``).
"""
