from __future__ import annotations

import pytest

from dsv4ops.runbooks.parse import Runbook, RunbookError, join, parse_runbook, split_comment

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


def parse(text: str = BOOK) -> Runbook:
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


STEPS = """\
# Kinds

1. Wait: for the decode.
   ```step
   kind: wait
   until: metric decode sglang:realtime_tokens_total{mode="decode"} > 0
   until: http router /readiness 200,204
   until: process prefill alive
   until: status healthy
   timeout: 30s
   if-failed: 3
   ```
2. Keep: a bundle.
   ```step
   kind: diagnostics
   max-bytes: 1000
   ```
3. Ask: a person.
   ```step
   kind: confirm
   question: Restart now?
   if-ok: end
   ```
4. Change: something.
   ```dsv4ops
   dsv4ops rollback --target {target}
   ```
   ```step
   repeat: safe
   ```
"""


def test_step_kinds_conditions_branches_and_repeat_marks() -> None:
    b = parse_runbook(STEPS, path="kinds.md")
    wait, diag, ask, change = b.steps
    assert [s.action for s in b.steps] == ["wait", "diagnostics", "confirm", "run"]
    metric, http, process, status = wait.conditions
    assert (metric.kind, metric.component, metric.series, metric.labels) == (
        "metric",
        "decode",
        "sglang:realtime_tokens_total",
        (("mode", "decode"),),
    )
    assert metric.op == ">" and metric.holds(1.0) and not metric.holds(0.0)
    assert http.codes == {200, 204} and http.path == "/readiness"
    assert (process.component, process.state) == ("prefill", "alive")
    assert status.kind == "status"
    assert wait.timeout_s == 30 and wait.if_failed == "3"
    assert b.after(wait, wait.if_failed) is ask and b.after(ask, ask.if_ok) is None
    assert b.after(wait, "") is diag and diag.max_bytes == 1000
    assert ask.question == "Restart now?" and ask.safe_to_repeat
    assert change.needs_confirmation and change.safe_to_repeat  # marked safe explicitly
    assert (
        not parse_runbook(STEPS.replace("repeat: safe", "kind: run"), path="k.md")
        .steps[3]
        .safe_to_repeat
    )  # a step that changes the target is not safe to repeat by default


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("kind: diagnostics", "kind: reboot", "k.md:15: unknown step kind 'reboot'"),
        ("   question: Restart now?\n", "", "k.md:19: confirm step 3 needs a 'question:'"),
        (
            "if-failed: 3",
            "if-failed: 9",
            "k.md:11: step 1 branches to step 9, which does not exist",
        ),
        (
            "until: process prefill alive",
            "until: process gpu alive",
            "k.md:8: unknown component 'gpu'",
        ),
        ("until: status healthy", "until: metric decode up", "k.md:9: a metric condition compares"),
        ("timeout: 30s", "timeout: soon", "k.md:10: cannot read 'soon'"),
        ("max-bytes: 1000", "size: 1000", "k.md:16: 'size: 1000' is not a step setting"),
        ("dsv4ops rollback --target {target}", "rm -rf /", "k.md:26: only dsv4ops commands"),
        ("   kind: diagnostics\n", "   kind: diagnostics\n   kind: wait\n", "'kind' appears twice"),
        # issue 21, F10: values that parse but mean nothing
        ("timeout: 30s", "timeout: 1e308", "k.md:10: '1e308' is more than the most allowed, 86400"),
        ("timeout: 30s", "timeout: inf", "k.md:10: 'inf' is not a finite number"),
        ("timeout: 30s", "timeout: nan", "k.md:10: 'nan' is not a finite number"),
        ("max-bytes: 1000", "max-bytes: 1e300", "is more than the most allowed"),
        ('{mode="decode"} > 0', '{mode="decode"} == nan', "k.md:6: 'nan' is not a finite number"),
        ('{mode="decode"} > 0', '{mode="decode"} < inf', "k.md:6: 'inf' is not a finite number"),
        (
            "/readiness 200,204",
            "/readiness 200,9999",
            "k.md:7: '200,9999': HTTP status codes are 100-599",
        ),
        (
            "{target}\n   ```\n   ```step",
            "{target}  # expect exit 999999999999\n   ```\n   ```step",
            "k.md:26: 'expect exit 999999999999': an exit code is 0-255",
        ),
        # issue 21, F4: a branch cycle would run for ever (also with --dry-run)
        (
            "if-ok: end",
            "if-ok: 1",
            "k.md:22: the branches make a cycle (step 1 -> step 2 -> step 3 -> step 1)",
        ),
        ("if-failed: 3", "if-failed: 1", "k.md:11: the branches make a cycle (step 1 -> step 1)"),
    ],
)
def test_a_malformed_runbook_is_refused_with_file_and_line(
    old: str, new: str, message: str
) -> None:
    assert old in STEPS
    with pytest.raises(RunbookError) as exc:
        parse_runbook(STEPS.replace(old, new), path="k.md")
    assert message in str(exc.value)


def test_kind_and_blocks_must_agree() -> None:
    no_until = STEPS.replace(
        '   until: metric decode sglang:realtime_tokens_total{mode="decode"} > 0\n'
        "   until: http router /readiness 200,204\n"
        "   until: process prefill alive\n   until: status healthy\n",
        "",
    )
    with pytest.raises(RunbookError, match=r"k.md:4: wait step 1 needs at least one 'until:'"):
        parse_runbook(no_until, path="k.md")
    commands_in_a_wait = STEPS.replace(
        "   if-failed: 3\n   ```\n",
        "   if-failed: 3\n   ```\n" "   ```dsv4ops\n   dsv4ops status\n   ```\n",
    )
    with pytest.raises(RunbookError, match="step 1 is kind wait; its commands belong in a run"):
        parse_runbook(commands_in_a_wait, path="k.md")
    with pytest.raises(RunbookError, match="k.md:1: a step block must be inside a numbered step"):
        parse_runbook("```step\nkind: wait\n```\n# T\n1. a\n", path="k.md")


def test_the_option_table_is_the_clis_own() -> None:
    """model.py reads a command's flags as click does from two tables: the options of the
    mutating commands that take a value, and the groups whose sub-command is the next word.
    They must be the CLI's, or `stop -X --dry-run` (X a new option) would be read wrongly."""
    import click

    from dsv4ops.cli import COMMANDS, cli
    from dsv4ops.runbooks.model import GROUPS, MUTATING, VALUE_OPTIONS

    ctx = click.Context(cli)
    groups = {n for n in COMMANDS if isinstance(cli.get_command(ctx, n), click.Group)}
    assert groups - {"runbook"} == GROUPS  # a runbook runs no runbook (refused before)
    takes_value: set[str] = set()
    for path in MUTATING:
        command = cli.get_command(ctx, path[0])
        for word in path[1:]:
            assert isinstance(command, click.Group)
            command = command.get_command(ctx, word)
        assert command is not None, path
        for p in command.params:
            if isinstance(p, click.Option) and not (p.is_flag or p.count):
                takes_value.update(p.opts + p.secondary_opts)
    assert takes_value == VALUE_OPTIONS
