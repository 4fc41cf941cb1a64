"""The Textual dashboard (``fugue-tui``, ``fugue-tui dashboard``): plan a campaign, launch the
runner, watch it live, handle hung cells from the keyboard, detach and attach again.

A second front end of the runner: it starts ``python -m engine.runner`` and follows the
campaign's event files (``engine.observe.follow``) into the shared state (``engine.observe.state``), exactly
as ``fugue-tui --batch`` does. It never imports torch. Modules: ``app`` (the App),
``actions`` (binding ids, keymap), ``plan_model`` (campaign document, preview, file),
``process`` (the runner process), ``series`` (monitor samples), ``replay`` (a recorded
campaign released on its own clock), ``results_model`` (the Results screen's rows, filter
and provenance), ``screens/`` and ``widgets/``.
"""

from __future__ import annotations


def run_dashboard(campaign: str | None = None, attach: str | None = None,
                  runs_dir: str = "runs", results: str | None = None,
                  replay: str | None = None, replay_speed: float = 1.0) -> int:
    """Run the dashboard in this terminal; returns the exit status (see ``app.FugueApp``)."""
    from fugue_tui.app.app import FugueApp

    app = FugueApp(campaign=campaign, attach=attach, runs_dir=runs_dir, results=results,
                   replay=replay, replay_speed=replay_speed)
    app.run()
    if app.farewell:
        print(app.farewell)
    return app.return_code or 0
