"""mkdocs hook: the configuration page's reference tables, written from the schema at build
time (``nodemanager.config.reference``), so no setting is described twice."""

from __future__ import annotations

from typing import Any

from nodemanager.config.reference import markdown

MARKER = "<!-- reference -->"


def on_page_markdown(text: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != "configuration.md":
        return text
    if MARKER not in text:
        raise ValueError(f"configuration.md lost its {MARKER} marker: the reference would be missing")
    return text.replace(MARKER, markdown())
