"""Plain data (dicts, lists, scalars) from libyaml's event stream, measured as it is built.

PyYAML's C loader spends most of its time making a node object, two position marks and a
Python call per value, then walking those nodes again to build the data; its pure-Python
loader is ten times slower still. Here the C parser's events are turned straight into
data, with the checks a document from a user needs made on the way, not in a second walk:

* a key given twice in one mapping is refused (YAML would keep the last silently);
* aliases are allowed, but every value counts once per place it appears, so a few hundred
  bytes of aliases that repeat aliases (a "billion laughs") are refused past a limit;
* nesting past a depth, an integer of too many digits, an alias of a value not yet ended
  (a document that contains itself) and tags other than YAML's plain ones are refused.

Scalars resolve and construct as PyYAML's safe loader does (the same resolver and
constructors, remembered per distinct text: a workload repeats the same few hundred).
Merge keys (``<<``) follow PyYAML too: keys written out win, then the first mapping merged.
"""

from __future__ import annotations

from typing import Any

import yaml

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_MERGE = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = (None, "!", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_SCALAR, _MAPPING_START, _MAPPING_END = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.MappingEndEvent
_SEQUENCE_START, _SEQUENCE_END = yaml.SequenceStartEvent, yaml.SequenceEndEvent


class Refused(ValueError):
    """Why the document is refused (one line, with its line number when it has one)."""


class _Open:
    """A mapping or a sequence being built."""

    __slots__ = ("anchor", "key", "key_text", "merges", "seen", "start", "value")

    def __init__(self, mapping: bool, anchor: str | None, start: int) -> None:
        self.value: dict | list = {} if mapping else []
        self.anchor = anchor
        self.start = start  # values counted before this one began
        self.key: Any = _NO_KEY  # a mapping's key waiting for its value
        self.key_text = ""  # the key's scalar text, for a duplicate's message
        self.seen: dict[Any, Any] | None = {} if mapping else None  # a mapping's keys written out: where each was
        self.merges: list[dict] = []


_NO_KEY = object()


class _Builder:
    def __init__(self, max_values: int, max_depth: int, max_digits: int) -> None:
        self.max_values = max_values
        self.max_depth = max_depth
        self.max_digits = max_digits
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, values it stands for)
        self.stack: list[_Open] = []
        self.root: Any = None
        self._resolver = yaml.resolver.Resolver()
        self._constructor = yaml.constructor.SafeConstructor()
        self._scalars: dict[tuple, Any] = {}

    def build(self, loader: yaml.CSafeLoader) -> Any:
        """The document's data. (One loop with the common cases written out and the counts in
        locals: a call or an attribute per event was most of the time past libyaml's own.)"""
        documents = 0
        scalars, stack, anchors, get_event = self._scalars, self.stack, self.anchors, loader.get_event
        count, max_values = 0, self.max_values  # values so far, every alias expanded
        parent: _Open | None = None  # stack[-1], or None
        while True:
            event = get_event()
            kind = type(event)
            if kind is _SCALAR:
                count += 1
                if count > max_values:
                    self._too_many()
                tag = event.tag
                plain = tag is None or tag == "!"
                value = scalars.get((event.value, event.implicit), _NO_KEY) if plain else _NO_KEY
                if value is _NO_KEY:
                    value = self._scalar(event)
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1)
                if parent is None:
                    self.root = value
                elif parent.key is _NO_KEY:
                    seen = parent.seen
                    if seen is None:  # (a list)
                        parent.value.append(value)
                    elif plain and value not in seen and value is not _MERGE_KEY:  # (most keys)
                        seen[value] = event.start_mark
                        parent.key, parent.key_text = value, event.value
                    else:
                        self._add(value, event, event.value if plain else None)
                elif parent.key is not _MERGE_KEY:
                    parent.value[parent.key] = value  # (most scalars: a mapping's value)
                    parent.key = _NO_KEY
                else:
                    self._add(value, event, None)
            elif kind is _MAPPING_START or kind is _SEQUENCE_START:
                if event.tag not in _PLAIN_TAGS:
                    raise Refused(f"line {event.start_mark.line + 1}: the tag {event.tag!r} is not supported (plain mappings and lists only)")
                if len(stack) >= self.max_depth:
                    raise Refused(f"nested too deeply (more than {self.max_depth} levels)")
                parent = _Open(kind is _MAPPING_START, event.anchor, count)
                stack.append(parent)
                count += 1
                if count > max_values:
                    self._too_many()
            elif kind is _MAPPING_END or kind is _SEQUENCE_END:
                done = stack.pop()
                if done.merges:
                    _merge(done)
                if done.anchor is not None:
                    anchors[done.anchor] = (done.value, count - done.start)
                parent = stack[-1] if stack else None
                if parent is None:
                    self.root = done.value
                elif parent.seen is None:  # (a list)
                    parent.value.append(done.value)
                elif parent.key is not _NO_KEY and parent.key is not _MERGE_KEY:
                    parent.value[parent.key] = done.value  # (a mapping's value)
                    parent.key = _NO_KEY
                else:
                    self._add(done.value, event, None)
            elif kind is yaml.AliasEvent:
                found = anchors.get(event.anchor)
                if found is None:
                    opened = any(o.anchor == event.anchor for o in stack)
                    why = "refers to a value that contains it" if opened else "is not defined"
                    raise Refused(f"line {event.start_mark.line + 1}: the alias *{event.anchor} {why}")
                count += found[1]
                if count > max_values:
                    self._too_many()
                self._add(found[0], event, None)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise Refused(f"line {event.start_mark.line + 1}: more than one document (a '---' separates documents; give one)")
            elif event is None or kind is yaml.StreamEndEvent:
                return self.root

    def _too_many(self) -> None:
        raise Refused(f"expands to more than {self.max_values:,} values (YAML aliases repeating aliases?)")

    def _scalar(self, event: yaml.ScalarEvent) -> Any:
        tag, text = event.tag, event.value
        if tag is None or tag == "!":
            cache_key: tuple = (text, event.implicit)
            found = self._scalars.get(cache_key, _NO_KEY)
            if found is not _NO_KEY:
                return found
            tag = self._resolver.resolve(yaml.ScalarNode, text, event.implicit)
        else:
            cache_key = (text, tag)
            found = self._scalars.get(cache_key, _NO_KEY)
            if found is not _NO_KEY:
                return found
        if tag == _STR:
            value: Any = text
        elif tag == _MERGE:
            value = _MERGE_KEY
        else:
            if tag == _INT and len(text.lstrip("+-")) > self.max_digits:
                raise Refused(f"line {event.start_mark.line + 1}: {self._path()}: a number of {len(text):,} digits (at most {self.max_digits})")
            construct = self._constructor.yaml_constructors.get(tag)
            if construct is None:
                raise Refused(f"line {event.start_mark.line + 1}: the tag {tag!r} is not supported")
            value = construct(self._constructor, yaml.ScalarNode(tag, text, event.start_mark, event.end_mark))
        self._scalars[cache_key] = value
        return value

    def _path(self) -> str:
        """Where the value being read sits (``pools[0].weight``), for a message."""
        path = ""
        for o in self.stack:
            if isinstance(o.value, list):
                path += f"[{len(o.value)}]"
            elif o.key is not _NO_KEY:
                path += f".{o.key_text}" if path else o.key_text
        return path or "the document"

    def _add(self, value: Any, event: yaml.Event, text: str | None) -> None:
        if not self.stack:
            self.root = value
            return
        parent = self.stack[-1]
        if parent.seen is None:  # (a list)
            parent.value.append(value)
        elif parent.key is _NO_KEY:
            if isinstance(value, (dict, list)):
                raise Refused(f"line {event.start_mark.line + 1}: a mapping or a list used as a key")
            parent.key, parent.key_text = value, text if text is not None else str(value)
            if value is not _MERGE_KEY:
                first = parent.seen.get(value)
                if first is not None:
                    line, first_line = event.start_mark.line + 1, first.line + 1
                    raise Refused(f"line {line}: key {parent.key_text!r} is given twice in one mapping (first on line {first_line})")
                parent.seen[value] = event.start_mark
        else:
            key, parent.key = parent.key, _NO_KEY
            if key is _MERGE_KEY:
                merged = value if isinstance(value, list) else [value]
                if not all(isinstance(m, dict) for m in merged):
                    raise Refused(f"line {event.start_mark.line + 1}: '<<' merges a mapping or a list of mappings")
                parent.merges.append(merged)
            else:
                parent.value[key] = value


class _MergeKey:
    """The ``<<`` key (never a key of the data built)."""


_MERGE_KEY = _MergeKey()


def _merge(done: _Open) -> None:
    """``done``'s keys after its ``<<`` merges, as PyYAML gives them: each later ``<<`` over
    the earlier, in a list the first mapping over the later, the keys written out over all."""
    merged: dict = {}
    for group in done.merges:
        for mapping in reversed(group):
            merged.update(mapping)
    written = dict(done.value)
    done.value.clear()
    done.value.update(merged)
    done.value.update(written)


def load(text: str, max_values: int, max_depth: int, max_digits: int) -> Any:
    """The one document in ``text`` (None when there is none); ``Refused`` or
    ``yaml.YAMLError`` when it cannot be read within the limits."""
    loader = yaml.CSafeLoader(text)
    try:
        return _Builder(max_values, max_depth, max_digits).build(loader)
    finally:
        loader.dispose()
