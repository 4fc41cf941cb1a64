"""The dashboard's screens: plan, run, and the small modal dialogs."""
