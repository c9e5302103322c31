"""Output helpers shared by commands: JSON printing and tables (tabulate imported lazily)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click

# Whether this invocation printed its JSON document: the error boundary (cli/__init__.py) then
# adds no second object to stdout (the document says how it ended: `exit`, `error`).
PRINTED: list[bool] = []


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    PRINTED.append(True)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    from tabulate import tabulate

    return tabulate(list(rows), headers=list(headers), tablefmt="simple")


def json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


# The flags every mutating command takes, with one meaning everywhere (README).
def yes_option(f: Any) -> Any:
    return click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")(f)


def reason_option(f: Any) -> Any:
    return click.option("--reason", default=None, help="Why (recorded in the journal).")(f)


def dry_run_option(f: Any) -> Any:
    return click.option("--dry-run", is_flag=True,
                        help="Print what it would do; change nothing.")(f)


def target_option(f: Any) -> Any:
    return click.option(
        "--target",
        "-t",
        "target",
        default=None,
        envvar="DSV4OPS_TARGET",
        help="Target name from profiles/targets.yaml (default: twin-local).",
    )(f)
