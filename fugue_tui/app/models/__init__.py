"""The dashboard's models, Textual-free: what the screens and panes show, as plain data and text."""
