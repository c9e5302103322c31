from __future__ import annotations

import pytest

from dsv4ops.runbooks.parse import RunbookError, join, parse_runbook, split_comment

VERBS = {"status", "canary", "deploy", "rollback", "stop", "kernels", "profile", "journal"}

BOOK = """\
# Decode wedged

**Symptom.** running > 0
and throughput 0.

1. Confirm: look first.
   ```dsv4ops
   dsv4ops status --target {target}
   # a comment line is skipped
   dsv4ops canary --target {target} --suite smoke  # expect exit 2

   ```
2. Check the profile: is overlap on?
   More prose.
3. Recover: restart the pair.
   ```dsv4ops
   dsv4ops deploy {profile} --target {target} --reason "wedge #1"  # the fix
   ```
   ```text
   this is an illustration: rm -rf / is never run
   ```

## Rehearse

```dsv4ops
dsv4ops deploy overlap-on --target {target} --no-canary
```
"""


def parse(text: str = BOOK):
    return parse_runbook(text, path="rb.md", verbs=VERBS)


def test_title_summary_steps_and_blocks() -> None:
    b = parse()
    assert b.name == "rb" and b.title == "Decode wedged"
    assert b.summary == "running > 0 and throughput 0."
    assert [s.number for s in b.steps] == [1, 2, 3]
    assert [s.title for s in b.steps] == ["Confirm", "Check the profile", "Recover"]
    one = b.steps[0]
    assert [c.argv for c in one.commands] == [
        ("dsv4ops", "status", "--target", "{target}"),
        ("dsv4ops", "canary", "--target", "{target}", "--suite", "smoke"),
    ]
    assert [c.line for c in one.commands] == [8, 10]
    assert b.steps[2].commands[0].argv[-1] == "wedge #1"  # '#' inside quotes is no comment
    assert b.steps[2].commands[0].note == "the fix"
    assert "illustration" not in b.steps[2].text and len(b.steps[2].commands) == 1
    assert [c.argv[2] for c in b.rehearse] == ["overlap-on"]
    assert b.placeholders == {"profile"}


def test_expectations() -> None:
    b = parse()
    assert b.steps[0].commands[0].expect == {0}
    assert b.steps[0].commands[1].expect == {2}
    text = BOOK.replace("# expect exit 2", "# expect exit 2 or 4")
    assert parse(text).steps[0].commands[1].expect == {2, 4}
    with pytest.raises(RunbookError, match=r"rb.md:10: cannot read 'expect exti 2'"):
        parse(BOOK.replace("# expect exit 2", "# expect exti 2"))


def test_manual_steps() -> None:
    b = parse()
    assert b.steps[1].manual and not b.steps[0].manual
    assert b.steps[1].text == "Check the profile: is overlap on?\nMore prose."


def test_target_and_placeholders_resolve() -> None:
    cmd = parse().steps[2].commands[0]
    argv = cmd.resolve({"target": "twin-local", "profile": "baseline"})
    assert argv == [
        "dsv4ops",
        "deploy",
        "baseline",
        "--target",
        "twin-local",
        "--reason",
        "wedge #1",
        "--yes",
    ]
    with pytest.raises(RunbookError, match=r"no value for \{profile\}") as exc:
        cmd.resolve({"target": "t"})
    assert exc.value.hint == "pass --var profile=VALUE"
    assert join(cmd.argv) == "dsv4ops deploy {profile} --target {target} --reason 'wedge #1'"


@pytest.mark.parametrize(
    ("line", "mutating"),
    [
        ("dsv4ops deploy baseline --target {target}", True),
        ("dsv4ops deploy baseline --target {target} --dry-run", False),
        ("dsv4ops rollback --target {target}", True),
        ("dsv4ops stop --target {target}", True),
        ("dsv4ops kernels deploy pkg.tar --target {target}", True),
        ("dsv4ops kernels rollback --target {target}", True),
        ("dsv4ops kernels list --target {target}", False),
        ("dsv4ops profile set baseline overlap=on --as x", True),
        ("dsv4ops profile show baseline", False),
        ("dsv4ops status --target {target}", False),
        ("dsv4ops canary --target {target} --suite smoke", False),
    ],
)
def test_confirmation_detected_from_the_command(line: str, mutating: bool) -> None:
    b = parse(f"# T\n\n1. Do: it.\n   ```dsv4ops\n   {line}\n   ```\n")
    assert b.steps[0].commands[0].mutating is mutating
    assert b.steps[0].needs_confirmation is mutating


def test_yes_only_added_to_commands_that_would_ask() -> None:
    b = parse(
        "# T\n\n1. Do: it.\n   ```dsv4ops\n   dsv4ops profile set a overlap=on --as b\n"
        "   dsv4ops stop -y\n   ```\n"
    )
    assert b.steps[0].commands[0].resolve({"target": "t"})[-1] == "b"
    assert b.steps[0].commands[1].resolve({"target": "t"}) == ["dsv4ops", "stop", "-y"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("rm -rf /tmp/x", r"rb.md:5: only dsv4ops commands run in a runbook, not 'rm'"),
        ("sudo dsv4ops status", r"rb.md:5: only dsv4ops commands"),
        ("dsv4ops status | tee x", r"rb.md:5: '\|' is shell syntax"),
        ("dsv4ops status --target $(cat t)", r"rb.md:5: .* is shell syntax"),
        ("dsv4ops status --target box", r"rb.md:5: write '--target \{target\}'"),
        ("dsv4ops status --target=box", r"rb.md:5: write '--target \{target\}'"),
        ("dsv4ops frobnicate", r"rb.md:5: unknown dsv4ops command 'frobnicate'"),
        ("dsv4ops runbook run x", r"rb.md:5: a runbook cannot run runbooks"),
        ("dsv4ops", r"rb.md:5: 'dsv4ops' needs a sub-command"),
        ('dsv4ops status "unclosed', r"rb.md:5: cannot parse"),
    ],
)
def test_rejected_commands_name_file_and_line(line: str, message: str) -> None:
    with pytest.raises(RunbookError, match=message):
        parse(f"# T\n\n1. Do: it.\n   ```dsv4ops\n   {line}\n   ```\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no title\n\n1. a\n", r"rb.md:1: a runbook starts with a '# Title'"),
        ("# T\n\nprose only\n", r"rb.md: no numbered steps"),
        ("# T\n\n1. a\n1. b\n", r"rb.md:4: step 1 appears twice"),
        ("# T\n\n1. a\n   ```dsv4ops\n   dsv4ops status\n", r"rb.md:4: code block is never closed"),
        (
            "# T\n\n1. a\n\nA paragraph ends the list.\n```dsv4ops\ndsv4ops status\n```\n",
            r"rb.md:6: a dsv4ops block must be inside a numbered step",
        ),
    ],
)
def test_bad_files(text: str, message: str) -> None:
    with pytest.raises(RunbookError, match=message):
        parse(text)


def test_rehearse_section_has_no_steps() -> None:
    b = parse("# T\n\n1. a\n\n## Rehearse\n\n1. not a step\n```dsv4ops\ndsv4ops status\n```\n")
    assert [s.number for s in b.steps] == [1] and len(b.rehearse) == 1


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("a b # c", ("a b", "c")),
        ("a b#c", ("a b#c", "")),
        ("a '# x' # y", ("a '# x'", "y")),
        ('a "it\'s # x" #y', ('a "it\'s # x"', "y")),
        ("# all comment", ("", "all comment")),
    ],
)
def test_split_comment(line: str, expected: tuple[str, str]) -> None:
    assert split_comment(line) == expected
