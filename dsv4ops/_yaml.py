"""The only module that imports yaml: safe loading with line numbers, safe dumping.

Loading is bounded for any input: a document is refused (YAMLSyntaxError, with a line where there
is one) when it is longer than MAX_DOCUMENT_CHARS, nested deeper than MAX_DEPTH, or when its
aliases expand to more than MAX_EXPANDED_NODES nodes or MAX_EXPANDED_CHARS characters of scalars
(an "alias bomb": 1 KB of YAML that expands to a billion items, which any later walk over the
data - a type check, an error message, a render - would follow). Profiles are a few hundred
nodes; the limits are two orders of magnitude above that.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml

from dsv4ops.jsontypes import JSONValue

# (node, depth, line that refers to it) -> (nodes, characters, height) once aliases expand
_Walk = Callable[[yaml.Node, int, int], tuple[int, int, int]]

MAX_DOCUMENT_CHARS = 256 * 1024
MAX_DEPTH = 32
MAX_EXPANDED_NODES = 20_000
MAX_EXPANDED_CHARS = 1_000_000
# A YAML library message can quote the input (an undefined alias name, a tag): keep it short.
MAX_MESSAGE_CHARS = 200


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
    def construct_object(self, node: yaml.Node, deep: bool = False) -> JSONValue:
        # A well-formed scalar can still be an impossible value (2001-99-99, an integer of 5,000
        # digits): the constructors raise ValueError; report it at the scalar's line.
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"invalid value: {_short(str(exc))}", node.start_mark
            ) from None


def _short(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _no_duplicates_mapping(
    loader: _Loader, node: yaml.MappingNode, deep: bool = False
) -> JSONValue:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # a list or mapping used as a key ('? [a, b]')
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a key must be a plain value (a name), not a list or mapping",
                key_node.start_mark,
            ) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {_short(repr(key), 80)}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates_mapping)


def _collect_lines(
    node: yaml.Node,
    prefix: str,
    info: LineInfo,
    name: Callable[[yaml.Node], str],
    seen: set[int] | None = None,
    path_ids: tuple[int, ...] = (),
) -> None:
    """Record each key's line, under the key as the checks will name it (`name`). An alias is a
    node already seen: its lines are the anchor's, so it is not walked again (which also keeps
    an alias bomb linear); an alias of one of its own ancestors is a recursive structure, which
    no profile needs and which the checks after loading would follow forever, so it is refused."""
    seen = set() if seen is None else seen
    if id(node) in path_ids:
        raise YAMLSyntaxError(
            f"recursive alias at {prefix or 'the top level'}: a value that contains itself",
            info.lines.get(prefix, node.start_mark.line + 1),
        )
    if id(node) in seen:
        return
    seen.add(id(node))
    path_ids = (*path_ids, id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = name(key_node)
            path = f"{prefix}.{key}" if prefix else key
            info.lines[path] = key_node.start_mark.line + 1
            _collect_lines(value_node, path, info, name, seen, path_ids)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}[{i}]"
            info.lines[path] = item.start_mark.line + 1
            _collect_lines(item, path, info, name, seen, path_ids)


def _key_name(loader: _Loader, key: yaml.Node) -> str:
    """A key as the loaded data spells it (`str` of the constructed value: '~' and 'null' are
    'None', '0x10' is '16'), so a check that names a key finds its line. A list or mapping key
    is refused when the document is constructed; its text here is only a placeholder."""
    if isinstance(key, yaml.ScalarNode):
        return str(loader.construct_object(key))
    return str(key.value)[:64]


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _check_expansion(node: yaml.Node) -> None:
    """Refuse a tree deeper than MAX_DEPTH, or whose aliases expand past the node or character
    budget. Linear in the size of the tree as written: each node's expanded size is computed
    once (an alias is the same node object as its anchor) and reused."""
    sizes: dict[int, tuple[int, int, int]] = {}  # id -> (nodes, scalar chars, height)
    active: set[int] = set()

    def walk(n: yaml.Node, depth: int, at: int) -> tuple[int, int, int]:
        # `at`: the line that refers to n (an alias node carries its anchor's marks, not its own).
        if depth > MAX_DEPTH:
            raise YAMLSyntaxError(f"nested deeper than {MAX_DEPTH} levels", at)
        known = sizes.get(id(n))
        if known is None:
            if id(n) in active:
                raise YAMLSyntaxError("recursive alias: a value that contains itself", at)
            active.add(id(n))
            known = _measure(n, depth, walk)
            active.discard(id(n))
            sizes[id(n)] = known
        if depth + known[2] > MAX_DEPTH:
            raise YAMLSyntaxError(
                f"nested deeper than {MAX_DEPTH} levels once its aliases are expanded", at
            )
        return known

    walk(node, 0, _line(node))


def _measure(n: yaml.Node, depth: int, walk: _Walk) -> tuple[int, int, int]:
    if isinstance(n, yaml.ScalarNode):
        return 1, len(n.value), 0
    if isinstance(n, yaml.MappingNode):
        children = [(c, _line(k)) for k, v in n.value for c in (k, v)]
    else:
        children = [(c, _line(n)) for c in n.value]
    nodes, chars, height = 1, 0, 0
    for child, at in children:
        c_nodes, c_chars, c_height = walk(child, depth + 1, at)
        nodes, chars, height = nodes + c_nodes, chars + c_chars, max(height, c_height + 1)
        if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
            raise YAMLSyntaxError(
                f"aliases expand this value to more than {MAX_EXPANDED_NODES} nodes or "
                f"{MAX_EXPANDED_CHARS} characters (an alias bomb?); a profile needs far fewer",
                _line(n),
            )
    return nodes, chars, height


class YAMLSyntaxError(ValueError):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def load_with_lines(text: str) -> tuple[JSONValue, LineInfo]:
    """Parse one YAML document; return (data, line info). Raises YAMLSyntaxError."""
    info = LineInfo()
    if len(text) > MAX_DOCUMENT_CHARS:
        raise YAMLSyntaxError(
            f"the document is {len(text)} characters long; the limit is {MAX_DOCUMENT_CHARS}", None
        )
    loader = _Loader(text)
    try:
        # Compose once; check its size, take line numbers from the node tree, then construct
        # from the same tree.
        node = loader.get_single_node()
        if node is None:
            return None, info
        _check_expansion(node)
        _collect_lines(node, "", info, lambda key: _key_name(loader, key))
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YAMLSyntaxError(_short(str(exc.problem or exc)), line) from exc
    except yaml.YAMLError as exc:
        raise YAMLSyntaxError(_short(str(exc)), None) from exc
    except RecursionError:  # the pure-Python composer, without libyaml's depth limit
        raise YAMLSyntaxError(f"nested deeper than {MAX_DEPTH} levels", None) from None
    finally:
        loader.dispose()
    return data, info


def safe_load(text: str) -> JSONValue:
    return load_with_lines(text)[0]


def dump(data: JSONValue) -> str:
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return text
