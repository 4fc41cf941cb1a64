"""``python -m engine.runner CAMPAIGN.toml ...``: the campaign runner (see
:mod:`engine.runner.supervisor`)."""

import sys

from engine.runner.supervisor import main

sys.exit(main())
