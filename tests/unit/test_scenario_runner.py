"""The shared scenario-file runner (tests/scenario.py): parsing, failure diffs, rewrite mode."""

from __future__ import annotations

import pytest

from tests.scenario import CommandHarness, check_scenario_file, parse

TEXT = """# a comment
echo x=1
----
x=1

# two lines
echo a=1 b=2
----
a=1
b=2
"""


class Echo(CommandHarness):
    def cmd_echo(self, kv) -> str:
        return "\n".join(f"{k}={v}" for k, v in kv.items())


def test_parse_keeps_comments_and_lines() -> None:
    blocks = parse(TEXT)
    assert [(prefix, b.command, b.expected, b.line) for prefix, b in blocks if b] == [
        (["# a comment"], "echo x=1", "x=1", 2),
        (["", "# two lines"], "echo a=1 b=2", "a=1\nb=2", 7),
    ]


def test_parse_requires_the_separator() -> None:
    with pytest.raises(ValueError, match="line 2: expected '----'"):
        parse("echo x=1\nx=1\n")


def test_a_matching_file_passes(tmp_path) -> None:
    path = tmp_path / "ok.txt"
    path.write_text(TEXT)
    check_scenario_file(path, Echo().run)


def test_a_difference_is_reported_as_a_diff_with_its_line(tmp_path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(TEXT.replace("a=1\nb=2\n", "a=1\nb=3\n"))
    with pytest.raises(AssertionError) as failure:
        check_scenario_file(path, Echo().run)
    message = str(failure.value)
    assert "1 block(s)" in message
    assert "bad.txt:7: echo a=1 b=2" in message
    assert "-b=3\n+b=2" in message


def test_an_unknown_command_fails_its_block(tmp_path) -> None:
    path = tmp_path / "unknown.txt"
    path.write_text("nope\n----\nok\n")
    with pytest.raises(AssertionError, match="exception: ValueError: unknown command 'nope'"):
        check_scenario_file(path, Echo().run)


def test_rewrite_mode_writes_the_codes_output_and_keeps_comments(tmp_path) -> None:
    path = tmp_path / "stale.txt"
    path.write_text(TEXT.replace("x=1\n\n", "stale\n\n"))
    check_scenario_file(path, Echo().run, rewrite=True)
    assert path.read_text() == TEXT
