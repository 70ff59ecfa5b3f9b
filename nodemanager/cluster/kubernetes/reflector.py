"""``Reflector``: list, then watch, one kind of object, and never miss or double a change.

It keeps the last known version of every object. A watch resumes from the last
resourceVersion it saw (bookmarks included); when the server says that version is too old
(HTTP 200 and an ERROR event with code 410, never an HTTP 410), it lists
afresh and reports the difference from what it knew as ADDED, MODIFIED and DELETED
changes: objects added and deleted while it was away are reported once, not lost.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from nodemanager.cluster.base import EventType
from nodemanager.cluster.kubernetes.convert import key_of

log = logging.getLogger("nodemanager.kubernetes")

PAGE_SIZE = 500
# Each watch asks the server to end it after a random 5-10 minutes (client-go's choice, so
# watches of many clients do not end together); the next resumes at once from its version.
WATCH_SECONDS = (300, 600)
# A watch of a kind that does not change receives no byte at all, not even a bookmark, until
# the server ends it, so its read timeout must outlast the requested timeout.
WATCH_READ_MARGIN = 30.0
MAX_LIST_RESTARTS = 5  # expired continuations in a row before the error is raised (and retried later)
READ_TIMEOUT = 120.0  # seconds without a byte on a LIST before giving up


@dataclass(frozen=True)
class Change:
    type: EventType
    key: str
    old: dict | None  # the version known before (None for ADDED)
    new: dict | None  # the version now (None for DELETED)


class Reflector:
    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        *,
        page_size: int = PAGE_SIZE,
        watch_seconds: tuple[int, int] = WATCH_SECONDS,
        asking: Callable[[], Callable[[], None]] = lambda: lambda: None,
    ) -> None:
        self.kind = kind
        self.list_call = list_call
        self.page_size = page_size
        self.watch_seconds = watch_seconds
        self.asking = asking  # before a list or a watch: what to tell once the server answers it
        self._random = random.Random()
        self.objects: dict[str, dict] = {}
        self.resource_version: str | None = None
        self.relists = 0

    def relist(self) -> list[Change]:
        """A fresh consistent list; the changes are its difference from what was known."""
        answered = self.asking()
        items, rv = self._list_all()
        answered()
        fresh = {key_of(o): o for o in items}
        changes = [Change(EventType.DELETED, k, old, None) for k, old in self.objects.items() if k not in fresh]
        for k, new in fresh.items():
            old = self.objects.get(k)
            if old is None:
                changes.append(Change(EventType.ADDED, k, None, new))
            elif old["metadata"].get("resourceVersion") != new["metadata"].get("resourceVersion"):
                changes.append(Change(EventType.MODIFIED, k, old, new))
        self.objects = fresh
        self.resource_version = rv
        self.relists += 1
        log.info("%s: listed %d at resourceVersion %s (%d changes)", self.kind, len(fresh), rv, len(changes))
        return changes

    def _list_all(self) -> tuple[list[dict], str]:
        items: list[dict] = []
        rv: str | None = None
        token: str | None = None
        restarts = 0
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size, "_preload_content": False, "_request_timeout": (10, READ_TIMEOUT)}
            if token:
                kwargs["_continue"] = token
            try:
                doc = json.loads(self.list_call(**kwargs).data)
            except ApiException as exc:
                if exc.status == 410 and token and restarts < MAX_LIST_RESTARTS:  # the snapshot expired mid-list
                    log.info("%s: list continuation expired; listing again from the start", self.kind)
                    items, rv, token, restarts = [], None, None, restarts + 1
                    continue
                raise
            rv = rv or doc["metadata"]["resourceVersion"]
            items.extend(doc.get("items") or [])
            token = doc["metadata"].get("continue")
            if not token:
                return items, rv

    def watch(self, handle: Callable[[Iterable[Change]], None]) -> None:
        """One watch request, from the last resourceVersion until the server ends it. The first
        call (or one after a 410) lists instead. Changes go to ``handle`` as they arrive."""
        if self.resource_version is None:
            handle(self.relist())
            return
        # The client's Watch.stream is not used: with deserialize=False it fails on the ERROR
        # event (KeyError 'raw_object'), and with it every object passes the client's strict
        # models, which refuse fields newer than the client. Lines of JSON are read here.
        seconds = self._random.randint(*self.watch_seconds)
        answered = self.asking()
        response = self.list_call(
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=seconds,
            _preload_content=False,
            _request_timeout=(10, seconds + WATCH_READ_MARGIN),
        )
        answered()  # the watch is open: the server answers
        try:
            for line in iter_resp_lines(response):
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    if status.get("code") != 410:
                        raise ApiException(status=status.get("code"), reason=f"{status.get('reason')}: {status.get('message')}")
                    log.info("%s: watch from resourceVersion %s expired (%s); listing again", self.kind, self.resource_version, status.get("message"))
                    self.resource_version = None
                    handle(self.relist())
                    return
                change = self._apply(event["type"], event["object"])
                if change is not None:
                    handle((change,))
            log.debug("%s: watch ended by the server after up to %ds; resuming from resourceVersion %s", self.kind, seconds, self.resource_version)
        finally:
            response.release_conn()

    def _apply(self, kind: str, obj: dict) -> Change | None:
        self.resource_version = obj["metadata"].get("resourceVersion") or self.resource_version
        if kind == "BOOKMARK":
            return None
        key = key_of(obj)
        old = self.objects.get(key)
        if kind == "DELETED":
            if old is None:
                return None
            del self.objects[key]
            return Change(EventType.DELETED, key, old, None)
        if old is not None and old["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion"):
            return None  # seen already (a watch replaying what a list returned)
        self.objects[key] = obj
        return Change(EventType.ADDED if old is None else EventType.MODIFIED, key, old, obj)
