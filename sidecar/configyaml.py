"""The YAML reader of the config file: PyYAML's safe loader, made strict and bounded.

- A key given twice in one mapping is refused (PyYAML keeps the last one without a word: a second ``server:``
  block would silently drop the first one's tokens), naming both lines.
- Aliases are bounded. An anchor costs nothing in the text but every alias repeats its whole node, so a few
  hundred bytes (the "billion laughs") expand to billions of values in every step that walks the tree. The
  document is measured as it would expand, on the composed node graph (each node measured once), and refused
  past ``MAX_EXPANDED_NODES`` values, ``MAX_EXPANDED_CHARS`` characters of scalars or ``MAX_ALIASES`` aliases.
- An alias inside the node it names (``a: &x [*x]``) would make the tree contain itself: refused, naming its line.

Every refusal is a ``ConfigError``; nothing here raises ``RecursionError``.
"""

from __future__ import annotations

from typing import Any

import yaml

from sidecar.errors import ConfigError

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_EXPANDED_CHARS", "MAX_EXPANDED_NODES", "load_yaml"]

# A real config file has a few hundred values; these leave room for a big one and stop a bomb early.
MAX_EXPANDED_NODES = 100_000
MAX_EXPANDED_CHARS = 16 * 1024 * 1024
MAX_ALIASES = 1_000
MAX_DEPTH = 100


class _Loader(yaml.SafeLoader):
    """SafeLoader (no arbitrary objects) with the checks above; one instance per document."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open: set[str] = set()  # anchors whose node is being composed
        self._aliases = 0
        self._depth = 0
        self._root: yaml.Node | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            line = _line(event.start_mark)
            if event.anchor in self._open:
                raise ConfigError(
                    "", f"alias *{event.anchor} (line {line}) refers to the node that contains it; it would never end"
                )
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ConfigError("", f"more than {MAX_ALIASES} aliases (line {line}); write the values out")
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ConfigError("", f"nested more than {MAX_DEPTH} levels deep (line {_line(event.start_mark)})")
        anchor: str | None = getattr(event, "anchor", None)
        fresh = anchor is not None and anchor not in self._open
        if anchor is not None and fresh:
            self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None and fresh:
                self._open.discard(anchor)

    def compose_document(self) -> yaml.Node | None:
        root = super().compose_document()
        if root is not None:
            _measure(root)
        self._root = root
        return root


def _measure(root: yaml.Node) -> None:
    """Refuse a document whose expansion (every alias replaced by its node) is over the bounds. Each distinct
    node is measured once (aliases share nodes), so this costs the size of the text, not of the expansion."""
    sizes: dict[int, tuple[int, int]] = {}
    # Children before parents without recursion: a node is finished once all its children are.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        kids = _children(node)
        if not children_done:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in sizes)
            continue
        n, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        for k in kids:
            kn, kc = sizes[id(k)]
            n, chars = n + kn, chars + kc
        if n > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
            line = node.start_mark.line + 1
            raise ConfigError(
                "",
                f"the value at line {line} expands (through aliases) to more than {MAX_EXPANDED_NODES} values or "
                f"{MAX_EXPANDED_CHARS // (1024 * 1024)} MiB of text; write it out or use fewer aliases",
            )
        sizes[id(node)] = (n, chars)


def _line(mark: Any) -> int:
    return int(mark.line) + 1 if mark is not None else 0


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def _construct_unique_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            # YAML allows `? {a: 1}` or `? [a, b]` as a key; no config key is one, and it cannot be hashed
            # for the duplicate check, so it is refused here with its line rather than raising TypeError.
            raise ConfigError(
                ".".join(_mapping_path(loader, node)), f"a key must be a plain name, not a {key_node.id} (line {line})"
            )
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            path = ".".join([*_mapping_path(loader, node), str(key)])
            raise ConfigError(path, f"duplicate key (line {seen[key]} and line {line}); keep one")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


def _mapping_path(loader: _Loader, node: yaml.MappingNode) -> list[str]:
    """The dotted path of ``node`` inside the document (found from the root: nodes do not know parents)."""
    root = loader._root
    if root is None:
        return []
    # Iterative and visiting each node once: the graph is a DAG (shared through aliases), measured above.
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, list[str]]] = [(root, [])]
    while stack:
        cur, trail = stack.pop()
        if cur is node:
            return trail
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, yaml.MappingNode):
            stack.extend((v, [*trail, str(k.value)]) for k, v in reversed(cur.value))
        elif isinstance(cur, yaml.SequenceNode):
            stack.extend((v, [*trail, str(i)]) for i, v in reversed(list(enumerate(cur.value))))
    return []


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_yaml(text: str, source: str = "the config") -> Any:
    """The YAML document in ``text`` as Python values; every problem is a ``ConfigError``."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # reads the first characters, so it may raise too
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError("", f"{source} is not valid YAML{where}") from None
    except RecursionError:
        raise ConfigError("", f"{source} nests too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
