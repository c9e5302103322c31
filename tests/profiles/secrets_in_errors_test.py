"""No output path prints a secret value, errors included (issue 11).

A profile whose secret has the wrong shape used to print `got {'HF_TOKEN': [...]}` with the token
in `validate`, `render`, `show` and `deploy --dry-run`. Each case here is a profile with one
mistake next to a secret, run through every command that reads a profile: in this process (its
stdout, stderr and warnings), and through one command as a real process, each command as a real
process for one case (a real process per pair cost 64 interpreter starts, ~12 s a case on CI).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.profiles.excerpt import excerpt
from testing.cli import Run, run_cli
from testing.profiles import child

SECRET = "hf_SEKRETvalue1234"

CASES = {
    "env-list": ("prefill:\n  env:\n    HF_TOKEN: [" + SECRET + "]\n", "prefill.env"),
    "env-mapping": ("router:\n  env:\n    OPENAI_API_KEY: {inner: " + SECRET + "}\n", "router.env"),
    "env-control": ('decode:\n  env:\n    HF_TOKEN: "' + SECRET + '\\0"\n', "decode.env.HF_TOKEN"),
    "argv-wrong-shape": (
        "decode:\n  extra_args: ['--api-key', '" + SECRET + "', {x: 1}]\n",
        "decode.extra_args",
    ),
    "argv-equals": (
        "prefill:\n  extra_args: ['--admin-api-key=" + SECRET + "', .inf]\n",
        "prefill.extra_args",
    ),
    # issue 21, F8: the flag and its value in one item, and `--flag=` with the value after it
    "argv-one-string": (
        "decode:\n  extra_args: ['--api-key " + SECRET + "']\n",
        "decode.extra_args[0]",
    ),
    "argv-empty-equals": (
        "prefill:\n  extra_args: ['--api-key=', '" + SECRET + "']\n",
        "prefill.extra_args[1]",
    ),
    "argv-stray": (
        "decode:\n  extra_args: ['--api-key', '" + SECRET + "', 'junk']\n",
        "decode.extra_args[2]",
    ),
}

COMMANDS = [
    ("profile", "validate"),
    ("profile", "validate", "--json"),
    ("profile", "render"),
    ("profile", "render", "--json"),
    ("profile", "show"),
    ("profile", "show", "--json"),
    ("deploy", "--dry-run", "--target", "twin-local"),
    ("deploy", "--dry-run", "--target", "twin-local", "--json"),
]


def _in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Run:
    """The CLI's `main` in this process; a warning it raised is part of what it printed."""
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    out, err = capsys.readouterr()
    return Run(code, out, err + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught))


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_command_prints_the_secret_of_a_bad_profile(
    write: Callable[[str, str], Path], pdir: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text, key = CASES[case]
    path = write("leaky", child(text))
    # The real process: the case's own command (each command has one case, each case one command).
    real = COMMANDS[sorted(CASES).index(case) % len(COMMANDS)]
    for command, as_process in [*((c, False) for c in COMMANDS), (real, True)]:
        argv = (
            [*command[:2], "leaky", *command[2:]]
            if command[0] == "profile"
            else ["deploy", "leaky", *command[1:]]
        )
        run = run_cli(*argv, profiles_dir=pdir) if as_process else _in_process(argv, capsys)
        assert run.code == 1, (argv, run.text)
        assert SECRET not in run.text, (argv, run.text)
        assert "SEKRET" not in run.text, (argv, run.text)
        assert "Traceback" not in run.text, (argv, run.text)
        if "--json" in argv and command[1] == "validate":
            (result,) = json.loads(run.out)
            assert result["problems"][0]["key"] == key and result["problems"][0]["path"] == str(
                path
            )
        else:
            assert f"{path}:" in run.err and f": {key}: " in run.err, (argv, run.err)


def test_validating_every_profile_hides_the_secrets_too(
    write: Callable[[str, str], Path], pdir: Path
) -> None:
    for i, (text, _) in enumerate(CASES.values()):
        write(f"leaky{i}", child(text))
    run = run_cli("profile", "validate", profiles_dir=pdir)
    assert run.code == 1 and run.text.count("FAIL  leaky") >= len(CASES), run.text
    assert "SEKRET" not in run.text, run.text


def test_the_excerpt_shows_the_shape_without_the_secret() -> None:
    assert excerpt({"HF_TOKEN": [SECRET], "A": "1"}) == "{'HF_TOKEN': ***, 'A': '1'}"
    assert excerpt(["--api-key", SECRET, {"x": 1}]) == "['--api-key', ***, {'x': 1}]"
    assert excerpt(["--ssl-keyfile-password=" + SECRET]) == "['--ssl-keyfile-password=***']"
    assert excerpt(SECRET, key="HF_TOKEN") == "***"
    assert excerpt(["--api-key " + SECRET]) == "['--api-key ***']"
    assert excerpt(["--api-key=", SECRET, "x"]) == "['--api-key=', ***, 'x']"
    assert excerpt(None, key="HF_TOKEN") == "None"  # nothing to hide: the key is just unset
    # a URL's password (targets.yaml's metrics URLs, named whole when an item has the wrong type)
    assert excerpt([f"http://u:{SECRET}@h:1", 5]) == "['http://u:***@h:1', 5]"


def test_the_excerpt_is_bounded_in_size_and_time() -> None:
    huge = ["x" * 10_000] * 10_000
    text = excerpt({"a": huge, "b": [[[[[[1]]]]]], "c": 10**4000})
    assert len(text) <= 120 and text.startswith("{'a': ['xxx")
    assert "<an integer of about" in excerpt(10**4000)
    assert excerpt([[[[[1]]]]]) == "[[[[...]]]]"


def test_profile_diff_hides_secrets_but_still_shows_that_they_changed(
    write: Callable[[str, str], Path], pdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        "one",
        child(f"prefill:\n  env: {{HF_TOKEN: {SECRET}}}\n  extra_args: [--api-key, {SECRET}]\n"),
    )
    write(
        "two",
        child("prefill:\n  env: {HF_TOKEN: hf_SEKRETother}\n  extra_args: [--api-key, SEKRET2]\n"),
    )
    # in this process, and the text diff once more as a real process
    for argv, as_process in (
        (["one", "two"], False),
        (["one", "two", "--json"], False),
        (["base", "one"], False),
        (["one", "two"], True),
    ):
        run = (
            run_cli("profile", "diff", *argv, profiles_dir=pdir)
            if as_process
            else _in_process(["profile", "diff", *argv], capsys)
        )
        assert run.code == 0, run.text
        assert "SEKRET" not in run.text, (argv, run.text)
        if "--json" not in argv and argv[0] == "one":
            assert "prefill.env.HF_TOKEN: '***' -> '***'" in run.out
            assert "env HF_TOKEN: '***' -> '***'" in run.out
    (text, key) = CASES["env-list"]
    write("leaky", child(text))
    run = _in_process(["profile", "diff", "base", "leaky"], capsys)
    assert run.code == 1 and "SEKRET" not in run.text and f": {key}: " in run.err, run.text
