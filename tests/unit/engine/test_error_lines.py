"""The one-line renderings of an exception (engine.errors), shared by the cells, the
executors and the front ends."""

from engine.errors import failure_line, first_line, one_line


def test_one_line_first_line_failure_line():
    exc = RuntimeError("first\n  second   part\n")
    assert one_line(exc) == "first second part"
    assert one_line(RuntimeError("x" * 400)) == "x" * 297 + "..."
    assert one_line(RuntimeError()) == first_line(RuntimeError("\n \n")) == "RuntimeError"
    assert first_line(RuntimeError("\n  died  \n  detail")) == "died"
    assert failure_line(exc) == "RuntimeError: first"
    assert failure_line(ValueError("y" * 600)) == ("ValueError: " + "y" * 600)[:500]
    assert failure_line(ValueError("y" * 600), 300) == ("ValueError: " + "y" * 600)[:300]
    assert failure_line(ValueError("y" * 600), None) == "ValueError: " + "y" * 600


def test_a_problem_list_keeps_its_lines_and_escapes_each():
    """The dashboard's list of every problem of a file is the one multi-line error: its
    lines stay lines, a newline inside a user's value in one of them does not add one."""
    from engine.errors import ProblemList

    error = ProblemList(["c.toml: 2 problems:", "c.toml:2: unknown key 'a\nb'",
                         "c.toml:3: key 'passes' must be an integer"])
    assert str(error).splitlines() == ["c.toml: 2 problems:", "c.toml:2: unknown key 'a\\nb'",
                                       "c.toml:3: key 'passes' must be an integer"]
