"""Running a campaign: the supervisor (``python -m engine.runner``), cell processes, the
watchdog, the control inbox and the cleanup of what cells leave behind. Torch-free.
"""
