import sys

from fugue_tui.cli import main

sys.exit(main())
