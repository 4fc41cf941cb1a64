"""The headless front end: ``fugue-tui --batch`` (its terminal live view and its JSON-lines stream)."""
