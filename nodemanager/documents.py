"""Reading the files users hand nodemanager (provider.yaml, workload files), bounded.

A file is read only if it is a regular file, decoded as UTF-8 (a problem names the byte
offset), no bigger than its kind allows, and parsed as JSON (when it starts with ``{``) or
YAML. A key given twice in one mapping is refused (YAML would keep the last silently, so
the first, perhaps a whole ``pools:`` list, would vanish). YAML aliases are allowed,
but the document they expand to is measured before anything is built from it: a few hundred
bytes of nested aliases (a "billion laughs") would otherwise expand to gigabytes. Nesting
deeper than Python can recurse is refused the same way. Every refusal is a
``DocumentProblem`` with one line of text; callers name the file.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_EXPANDED_NODES = 5_000_000  # YAML nodes once aliases are expanded (a 100,000-pod List is ~3M)
MAX_DEPTH = 200  # nesting of mappings and lists
MAX_DIGITS = 100  # in one number: past it a value is a typo (and Python refuses 4,300)
_INT = "tag:yaml.org,2002:int"
CONFIG_BYTES = 4 * 2**20  # provider.yaml
WORKLOAD_BYTES = 1 * 2**30  # a workload file (a List of 1,000,000 pods is about 600 MB)


class DocumentProblem(ValueError):
    """Why a file cannot be read as a document (one line, without the file's name)."""


def read_text(path: str | Path, max_bytes: int) -> str:
    """The file's text: a regular file of at most ``max_bytes``, UTF-8."""
    p = Path(path)
    try:
        found = p.stat()
        if not stat.S_ISREG(found.st_mode):
            raise DocumentProblem("not a regular file")
        if found.st_size > max_bytes:
            raise DocumentProblem(f"{found.st_size:,} bytes is more than the {max_bytes:,} allowed")
        data = p.read_bytes()
    except OSError as exc:
        raise DocumentProblem(f"cannot read the file: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentProblem(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def parse(text: str) -> Any:
    """The document in ``text``: JSON if it starts with ``{``, else YAML."""
    try:
        if text.lstrip().startswith("{"):
            return json.loads(text, parse_int=_json_int)
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _measure(node, {}, 0, "")
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except RecursionError:
        raise DocumentProblem(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as exc:
        raise DocumentProblem(f"line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise DocumentProblem(f"{where}not valid YAML: {getattr(exc, 'problem', None) or exc}") from None


def _child(where: str, key: yaml.Node) -> str:
    name = key.value if isinstance(key, yaml.ScalarNode) else "?"
    return f"{where}.{name}" if where else str(name)


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise DocumentProblem(f"a number of {len(text):,} digits (at most {MAX_DIGITS})")
    return int(text)


def _measure(node: yaml.Node, sizes: dict[int, int], depth: int, where: str) -> int:
    """How many nodes ``node`` (at key path ``where``) stands for with every alias expanded
    (each shared node is measured once); refuses documents past the limits."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    if depth > MAX_DEPTH:
        raise DocumentProblem(f"nested too deeply (more than {MAX_DEPTH} levels)")
    size = 1
    if isinstance(node, yaml.ScalarNode) and node.tag == _INT and len(node.value) > MAX_DIGITS:
        line = node.start_mark.line + 1
        raise DocumentProblem(f"line {line}: {where or 'the document'}: a number of {len(node.value):,} digits (at most {MAX_DIGITS})")
    if isinstance(node, yaml.SequenceNode):
        size += sum(_measure(child, sizes, depth + 1, f"{where}[{i}]") for i, child in enumerate(node.value))
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                line = key.start_mark.line + 1
                if key.value in seen:
                    raise DocumentProblem(f"line {line}: key {key.value!r} is given twice in one mapping (first on line {seen[key.value]})")
                seen[key.value] = line
        size += sum(_measure(k, sizes, depth + 1, where) + _measure(v, sizes, depth + 1, _child(where, k)) for k, v in node.value)
    if size > MAX_EXPANDED_NODES:
        raise DocumentProblem(f"expands to more than {MAX_EXPANDED_NODES:,} values (YAML aliases repeating aliases?)")
    sizes[id(node)] = size
    return size
