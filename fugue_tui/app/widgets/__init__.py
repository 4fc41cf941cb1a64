"""The dashboard's widgets, one per module: catalogue tree, cell table, job progress, device
charts, log pane."""
