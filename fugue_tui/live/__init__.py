"""The shared model of a running campaign, for every front end that shows one: the
terminal's live view and plain lines (:mod:`fugue_tui.console`) and the dashboard's run
screen (:mod:`fugue_tui.app`).

- :mod:`fugue_tui.live.event_text`: what each front end writes for an event (the one
  event → text function);
- :mod:`fugue_tui.live.view`: :class:`~fugue_tui.live.view.LiveView`, the display of an
  :class:`engine.observe.state.CampaignState` with its recent lines;
- :mod:`fugue_tui.live.job_table`: the job rows of the current cell;
- :mod:`fugue_tui.live.styles`: the words and colours of cell states;
- :mod:`fugue_tui.live.progress_math`: a job's completed fraction and ETA.

No Textual and no console I/O here: the front ends own their output.
"""
