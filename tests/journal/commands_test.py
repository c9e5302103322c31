"""The printed recovery commands: each names its target, quoted as a shell reads it."""

from __future__ import annotations

from dsv4ops.journal.commands import command


def test_a_printed_command_names_its_target_shell_quoted() -> None:
    assert (
        command("stop", "twin-fast", "--recover") == "`dsv4ops stop --recover --target twin-fast`"
    )
    # pasted, a name with a space or a `;` stays one word: never a second command
    assert command("deploy", "my box;rm", "PROFILE") == (
        "`dsv4ops deploy PROFILE --target 'my box;rm'`"
    )
    assert command("kernels rollback", "t", "--to", "0.2.0") == (
        "`dsv4ops kernels rollback --to 0.2.0 --target t`"
    )
