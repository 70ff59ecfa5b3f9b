"""``Journal``: the names of what changed, in order, for readers that catch up now and then.

A reader that keeps something per node (the controller's planning view of each record) need
not look at every node when it catches up: it asks for the names changed since its last
``mark``. The journal is bounded: past its limit it starts again, and a reader whose mark is
from before is told to look at everything.
"""

from __future__ import annotations

from dataclasses import dataclass

Mark = tuple[int, int]  # (the journal's epoch, how many names it held)


@dataclass(eq=False)
class Journal:
    limit: int = 4096  # names kept before it starts again (readers then look at everything)

    def __post_init__(self) -> None:
        self._names: list[str] = []
        self._epoch = 0

    def add(self, name: str) -> None:
        if len(self._names) >= self.limit:
            self._names = []
            self._epoch += 1
        self._names.append(name)

    def mark(self) -> Mark:
        """Where a reader stands now."""
        return self._epoch, len(self._names)

    def since(self, mark: Mark | None) -> set[str] | None:
        """The names changed since ``mark``; None when the journal cannot say (no mark, or
        it started again since): the reader must look at everything."""
        if mark is None or mark[0] != self._epoch:
            return None
        return set(self._names[mark[1] :])


def changed_since(journals: tuple[Journal, ...], marks: tuple[Mark, ...] | None) -> tuple[set[str] | None, tuple[Mark, ...]]:
    """The names any of ``journals`` gave since ``marks`` (None: the reader must look at
    everything), and where the journals stand now (the reader's next marks)."""
    now = tuple([j.mark() for j in journals])
    if marks is None:
        return None, now
    if marks == now:  # (mostly: nothing changed since)
        return set(), now
    names: set[str] = set()
    for journal, mark in zip(journals, marks, strict=True):
        found = journal.since(mark)
        if found is None:
            return None, now
        names |= found
    return names, now
