"""Reading the files users hand nodemanager (provider.yaml, workload files), bounded.

A file is read only if it is a regular file, decoded as UTF-8 (a problem names the byte
offset), no bigger than its kind allows, and parsed as JSON (when it starts with ``{``) or
YAML. YAML is built from libyaml's events (``yaml_builder``), checked as it is read: a key
given twice in one mapping is refused (YAML would keep the last silently, so the first,
perhaps a whole ``pools:`` list, would vanish); aliases are allowed, but the values they
expand to are counted, as a few hundred bytes of nested aliases (a "billion laughs") would
otherwise expand to gigabytes; nesting and numbers are bounded. Every refusal is a
``DocumentProblem`` with one line of text; callers name the file.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from nodemanager import yaml_builder

MAX_EXPANDED_NODES = 5_000_000  # YAML nodes once aliases are expanded (a 100,000-pod List is ~3M)
MAX_DEPTH = 200  # nesting of mappings and lists
MAX_DIGITS = 100  # in one number: past it a value is a typo (and Python refuses 4,300)
CONFIG_BYTES = 4 * 2**20  # provider.yaml
WORKLOAD_BYTES = 1 * 2**30  # a workload file (a List of 1,000,000 pods is about 600 MB)


class DocumentProblem(ValueError):
    """Why a file cannot be read as a document (one line, without the file's name)."""


def read_text(path: str | Path, max_bytes: int) -> str:
    """The file's text: a regular file of at most ``max_bytes``, UTF-8."""
    with _opened(path, max_bytes) as f:
        data = _read(f.read)
    return _decoded(data, 0)


def read_lines(path: str | Path, max_bytes: int) -> Iterator[tuple[int, str]]:
    """The file's lines (numbered from 1) as they are read: a regular file of at most
    ``max_bytes``, UTF-8; a problem found on the way stops the reading."""
    with _opened(path, max_bytes) as f:
        offset = 0
        for number, data in enumerate(iter(lambda: _read(f.readline), b""), start=1):
            yield number, _decoded(data, offset)
            offset += len(data)


def _opened(path: str | Path, max_bytes: int) -> BinaryIO:
    p = Path(path)
    try:
        found = p.stat()
        if not stat.S_ISREG(found.st_mode):
            raise DocumentProblem("not a regular file")
        if found.st_size > max_bytes:
            raise DocumentProblem(f"{found.st_size:,} bytes is more than the {max_bytes:,} allowed")
        return p.open("rb")
    except OSError as exc:
        raise DocumentProblem(f"cannot read the file: {exc.strerror or exc}") from None


def _read(read: Callable[[], bytes]) -> bytes:
    try:
        return read()
    except OSError as exc:
        raise DocumentProblem(f"cannot read the file: {exc.strerror or exc}") from None


def _decoded(data: bytes, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentProblem(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {offset + exc.start})") from None


def parse(text: str) -> Any:
    """The document in ``text``: JSON if it starts with ``{``, else YAML."""
    try:
        if text.lstrip().startswith("{"):
            return json.loads(text, parse_int=_json_int)
        return yaml_builder.load(text, MAX_EXPANDED_NODES, MAX_DEPTH, MAX_DIGITS)
    except yaml_builder.Refused as exc:
        raise DocumentProblem(str(exc)) from None
    except RecursionError:
        raise DocumentProblem(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as exc:
        raise DocumentProblem(f"line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise DocumentProblem(f"{where}not valid YAML: {getattr(exc, 'problem', None) or exc}") from None


def parse_json(text: str) -> Any:
    """One JSON value (a line of a JSON Lines file), numbers bounded as in ``parse``."""
    try:
        return json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise DocumentProblem(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as exc:
        raise DocumentProblem(f"column {exc.colno}: not valid JSON: {exc.msg}") from None


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise DocumentProblem(f"a number of {len(text):,} digits (at most {MAX_DIGITS})")
    return int(text)
