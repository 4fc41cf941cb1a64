"""An executor option as text and back, Textual-free: what the plan's form parses from its
option boxes and shows in them (the campaign file holds the values, typed by the option's
declaration: :mod:`engine.define.executor_options`)."""

from __future__ import annotations

from typing import Any


def parse_option(value: str, types: tuple[type, ...], axis: bool = False) -> Any:
    """An executor option typed into the plan: ``""`` is unset (None); ints, floats and
    booleans are parsed by the option's declared types; a comma list for an axis option
    (e.g. ``asha,median``) becomes a list.

    Raises:
        ValueError: the text is not a value of the declared type.
    """
    text = value.strip()
    if not text:
        return None
    if axis and "," in text:
        return [parse_option(part, tuple(t for t in types if t is not list)) for part in
                text.split(",") if part.strip()]
    if list in types and not axis and text != "auto":
        # a list-valued option (mp's devices, issue 27): one entry or a comma list
        return [parse_option(part, tuple(t for t in types if t is not list)) for part in
                text.split(",") if part.strip()]
    if bool in types:
        if text.lower() in ("true", "yes", "on", "1"):
            return True
        if text.lower() in ("false", "no", "off", "0"):
            return False
        raise ValueError(f"expected true or false, got {text!r}")
    if int in types:
        try:
            return int(text)
        except ValueError:
            if str in types and float not in types:
                return text  # a number or a word (max_parallel: N or auto): checked later
            if float not in types:
                raise ValueError(f"expected an integer, got {text!r}") from None
    if float in types:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    return text


def format_option(value: Any) -> str:
    """The text shown for an option value (inverse of :func:`parse_option`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(format_option(v) for v in value)
    return str(value)
