"""``python -m engine.runner CAMPAIGN.toml ...``: the campaign runner (see
:mod:`engine.runner.cli`)."""

import sys

from engine.runner.cli import main

sys.exit(main())
