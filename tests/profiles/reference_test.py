"""docs/profiles.md's settings tables are what `dsv4ops profile schema --markdown` prints from
the declaration the loader checks by (profiles/reference.py): a key added, removed or given other
bounds without the docs fails here."""

from __future__ import annotations

import re
from pathlib import Path

from dsv4ops.profiles.reference import (
    begin_marker,
    end_marker,
    markdown,
    profile_blocks,
    targets_blocks,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "profiles.md"


def _docs_blocks(text: str) -> dict[str, list[str]]:
    blocks = {}
    for m in re.finditer(
        r"<!-- settings:([\w-]+): begin -->\n(.*?)\n<!-- settings:\1: end -->", text, re.S
    ):
        blocks[m.group(1)] = m.group(2).splitlines()
    return blocks


def test_the_docs_tables_are_what_the_declaration_prints() -> None:
    generated = {**profile_blocks(), **targets_blocks()}
    docs = _docs_blocks(DOCS.read_text(encoding="utf-8"))
    assert set(docs) == set(generated), (
        "docs/profiles.md: run `dsv4ops profile schema --markdown` (and --targets --markdown) "
        f"and paste its blocks; the docs have {sorted(docs)}, the declaration {sorted(generated)}"
    )
    stale = [name for name in generated if docs[name] != generated[name]]
    assert not stale, f"docs/profiles.md's settings:{stale} tables differ from the declaration"


def test_the_markdown_is_the_blocks_between_their_markers() -> None:
    text = markdown(profile_blocks())
    assert _docs_blocks(text) == profile_blocks()
    assert text.startswith(begin_marker("top") + "\n| key | type | default | bounds |")
    assert end_marker("probe") in text


def test_a_row_says_what_the_loader_checks() -> None:
    rows = profile_blocks()["router"]
    assert "| `router.port` | int | `8000` | 1-65535 | the port clients send requests to |" in rows
    assert any(r.startswith("| `router.health_check.endpoint` | str | `/health` |") for r in rows)
    model = profile_blocks()["model"]
    assert any(r.startswith("| `model.path` | str | required |") for r in model)
