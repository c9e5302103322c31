"""Output helpers shared by commands: JSON printing and tables (tabulate imported lazily)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    from tabulate import tabulate

    return tabulate(list(rows), headers=list(headers), tablefmt="simple")


def json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


def target_option(f: Any) -> Any:
    return click.option(
        "--target",
        "-t",
        "target",
        default=None,
        envvar="DSV4OPS_TARGET",
        help="Target name from profiles/targets.yaml (default: twin-local).",
    )(f)
