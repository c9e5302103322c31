"""The only module that imports yaml: safe loading with line numbers, safe dumping."""

from __future__ import annotations

from typing import Any

import yaml


class LineInfo:
    """Maps key paths ('decode.buckets') of one loaded document to 1-based line numbers."""

    def __init__(self) -> None:
        self.lines: dict[str, int] = {}

    def get(self, key_path: str) -> int | None:
        # Fall back to the nearest parent that has a line.
        parts = key_path.split(".")
        while parts:
            line = self.lines.get(".".join(parts))
            if line is not None:
                return line
            parts.pop()
        return None


# The C loader (libyaml) when present: it halves `profile render` start-up.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    pass


def _no_duplicates_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates_mapping)


def _collect_lines(node: yaml.Node, prefix: str, info: LineInfo,
                   seen: set[int] | None = None, path_ids: tuple[int, ...] = ()) -> None:
    """Record each key's line. An alias is a node already seen: its lines are the anchor's, so it
    is not walked again (which also keeps an alias bomb linear); an alias of one of its own
    ancestors is a recursive structure, which no profile needs and which the checks after
    loading would follow forever, so it is refused."""
    seen = set() if seen is None else seen
    if id(node) in path_ids:
        raise YAMLSyntaxError(f"recursive alias at {prefix or 'the top level'}: a value that contains itself",
                              info.lines.get(prefix, node.start_mark.line + 1))
    if id(node) in seen:
        return
    seen.add(id(node))
    path_ids = (*path_ids, id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            path = f"{prefix}.{key}" if prefix else key
            info.lines[path] = key_node.start_mark.line + 1
            _collect_lines(value_node, path, info, seen, path_ids)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}[{i}]"
            info.lines[path] = item.start_mark.line + 1
            _collect_lines(item, path, info, seen, path_ids)


class YAMLSyntaxError(ValueError):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def load_with_lines(text: str) -> tuple[Any, LineInfo]:
    """Parse one YAML document; return (data, line info). Raises YAMLSyntaxError."""
    info = LineInfo()
    loader = _Loader(text)
    try:
        # Compose once; take line numbers from the node tree, then construct from the same tree.
        node = loader.get_single_node()
        if node is None:
            return None, info
        _collect_lines(node, "", info)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YAMLSyntaxError(str(exc.problem or exc), line) from exc
    except yaml.YAMLError as exc:
        raise YAMLSyntaxError(str(exc), None) from exc
    finally:
        loader.dispose()
    return data, info


def safe_load(text: str) -> Any:
    return load_with_lines(text)[0]


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
