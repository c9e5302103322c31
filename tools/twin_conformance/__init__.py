"""Extract SGLang's outward surface (HTTP endpoints, Prometheus metrics, chat stream chunk keys,
tool-call delta shape) from the real wheel with `ast`, for the twin's conformance fixture.

Run it as `tools/extract_twin_conformance.py WHEEL_OR_DIR [-o OUT.json]`; see docs/twin.md
("Conformance"). Every fact carries the `file:line` (inside the `sglang/` package) it came from.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .endpoints import extract_endpoints
from .metrics import extract_metrics
from .sources import SourceError, SourceTree
from .stream import extract_stream

SCHEMA = 1
MULTIPROCESS = ("srt/entrypoints/engine.py", "set_prometheus_multiproc_dir")


def _multiprocess_note(src: SourceTree) -> dict[str, Any]:
    """SGLang serves /metrics through prometheus_client's MultiProcessCollector when metrics are
    on; that drops `_created` samples and keeps a `pid` label on gauges in mode all/liveall."""
    rel, func = MULTIPROCESS
    text = src.text(rel)
    for i, line in enumerate(text.splitlines(), 1):
        if f"{func}()" in line and "def " not in line and "import" not in line:
            return {
                "multiprocess": True,
                "source": f"{rel}:{i}",
                "collector": "prometheus_client.multiprocess.MultiProcessCollector",
            }
    raise SourceError(f"sglang/{rel} never calls {func}()")


def extract(path: Path) -> dict[str, Any]:
    """The fixture for the SGLang wheel or unpacked tree at `path`. Raises SourceError."""
    src = SourceTree.open(path)
    version = src.version()
    endpoints = extract_endpoints(src)
    metrics, label_sets = extract_metrics(src)
    stream = extract_stream(src)
    exposition = _multiprocess_note(src)
    return {
        "schema": SCHEMA,
        "generated_by": "tools/extract_twin_conformance.py",
        "sglang_version": version,
        "wheel": {"file": path.name, "sha256": src.wheel_sha256}
        if src.wheel_sha256
        else {"file": None, "sha256": None, "unpacked_dir": str(path)},
        "sources_sha256": dict(sorted(src.read_sha256.items())),
        "endpoints": endpoints,
        "metric_label_sets": label_sets,
        "metrics_exposition": exposition,
        "metrics": metrics,
        "chat_stream": stream["chunks"],
        "models": stream["models"],
        "tool_call_delta": stream["tool_call_delta"],
    }


def render(fixture: dict[str, Any]) -> str:
    """JSON with one line per endpoint, metric, chunk kind, ...: small, and diffs read well."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    parts = []
    for key, value in fixture.items():
        if isinstance(value, list) and value:
            body = ",\n".join(f"  {one(v)}" for v in value)
            parts.append(f" {one(key)}: [\n{body}\n ]")
        elif isinstance(value, dict) and value:
            body = ",\n".join(f"  {one(k)}: {one(v)}" for k, v in value.items())
            parts.append(f" {one(key)}: {{\n{body}\n }}")
        else:
            parts.append(f" {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="extract_twin_conformance.py",
        description="Write the twin conformance fixture from an SGLang wheel or unpacked tree.",
    )
    parser.add_argument("source", type=Path, help="sglang-*.whl, or a folder holding sglang/")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        text = render(extract(args.source))
    except (SourceError, SyntaxError, OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0
