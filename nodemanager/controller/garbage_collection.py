"""The garbage collector (``loops.orphanGC``, 60 s): an instance tagged as this controller's
that no node record knows is terminated, on the second pass that finds it (one launched
between the listing and the records is not an orphan; one unknown on two passes in a row
is). The same pass resolves the boot image again for the types running, so drift compares
nodes with a new image without a boot. The cloud is called outside the controller's lock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cloud.base import Instance
from cloud.errors import CloudError
from nodemanager.model import NodeState

if TYPE_CHECKING:
    from nodemanager.controller.node_controller import NodeController

log = logging.getLogger("nodemanager.controller")


class OrphanCollector:
    def __init__(self, controller: NodeController) -> None:
        self.c = controller
        self.suspects: set[str] = set()  # unknown on the last pass: terminated if unknown on this one

    def run(self) -> None:
        c = self.c
        try:
            instances = c.cloud.list_instances()
        except CloudError as exc:
            log.warning("orphan GC skipped: %s", exc)
            return
        self._refresh_images(instances)
        with c.lock:
            known = {n.instance_id for n in c.nodes.values() if n.instance_id and n.state is not NodeState.TERMINATED}
            unknown = {i.instance_id for i in instances if i.alive and i.instance_id not in known}
            doomed = sorted(unknown & self.suspects)
            self.suspects = unknown - set(doomed)
        if doomed:
            log.warning("terminating %d orphaned instance(s): %s", len(doomed), ", ".join(doomed))
            try:
                c.cloud.terminate(doomed)
                c.metrics.terminations.labels("orphan").inc(len(doomed))
            except CloudError as exc:
                log.warning("orphan termination failed, will retry: %s", exc)
                with c.lock:
                    self.suspects |= set(doomed)

    def _refresh_images(self, instances: list[Instance]) -> None:
        refresh = getattr(self.c.cloud, "refresh_images", None)  # a cloud that resolves images by query
        if refresh is None:
            return
        try:
            refresh({i.instance_type for i in instances if i.alive})
        except CloudError as exc:
            log.warning("boot image not resolved again (drift waits for it): %s", exc)
