"""The headless front end: ``fugue-tui --batch`` (:mod:`~fugue_tui.console.batch`: the
runner started and followed, the report at the end), its progress as plain lines
(:mod:`~fugue_tui.console.plain`), as a terminal live view (:mod:`~fugue_tui.console.live`)
or as JSON lines (:mod:`~fugue_tui.console.batch_json`), and ``--dry-run``'s plan
(:mod:`~fugue_tui.console.dry_run`). What an event says and how a running campaign is drawn
are shared with the dashboard: :mod:`fugue_tui.live`. Never imports :mod:`fugue_tui.app`."""
