"""The garbage collector (``loops.orphanGC``, 60 s), over one listing of this controller's
instances:
* an instance no node record knows is terminated, on the second pass that finds it (one
  launched between the listing and the records is not an orphan; one unknown on two passes
  in a row is);
* a node record whose instance is on neither of two listings in a row (terminated by someone
  else, reclaimed at launch, lost with a reset endpoint) is marked for termination at once,
  with a warning and an event, so its pods get a new node now rather than after
  ``nodes.bootTimeout`` or ``nodes.healthyTimeout``. Only records whose instance was known
  before the first of the two listings began count, so a listing that lags a launch never
  condemns it.
The same pass resolves the boot image again for the types running, so drift compares nodes
with a new image without a boot. The cloud is called outside the controller's lock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cloud.base import Instance
from cloud.errors import CloudError
from nodemanager.model import NodeState

if TYPE_CHECKING:
    from cloud.base import CloudClient
    from nodemanager.controller.state import ClusterState
    from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.controller")


class OrphanCollector:
    def __init__(self, state: ClusterState, cloud: CloudClient, metrics: Metrics) -> None:
        self.state = state
        self.cloud = cloud
        self.metrics = metrics
        self.suspects: set[str] = set()  # unknown on the last pass: terminated if unknown on this one
        self.missing: dict[str, str] = {}  # node -> its instance, not listed on the last pass

    def run(self) -> None:
        c = self.state
        with c.lock:
            before = self._recorded()  # known before the listing began: a listing must show them
        try:
            instances = self.cloud.list_instances()
        except CloudError as exc:
            log.warning("orphan GC skipped: %s", exc)
            return
        self._refresh_images(instances)
        alive = {i.instance_id for i in instances if i.alive}
        with c.lock:
            recorded = self._recorded()
            known = set(recorded.values())
            unknown = alive - known
            doomed = sorted(unknown & self.suspects)
            self.suspects = unknown - set(doomed)
            self._vanished({name: iid for name, iid in before.items() if recorded.get(name) == iid and iid not in alive})
        if doomed:
            log.warning("terminating %d orphaned instance(s): %s", len(doomed), ", ".join(doomed))
            try:
                self.cloud.terminate(doomed)
                self.metrics.terminations.labels("orphan").inc(len(doomed))
            except CloudError as exc:
                log.warning("orphan termination failed, will retry: %s", exc)
                with c.lock:
                    self.suspects |= set(doomed)

    def idle(self, alive: set[str]) -> bool:
        """With ``alive`` the instances alive: its next pass does nothing, nor any after while
        nothing changes (it suspects none, misses none, and they are the records')."""
        return not self.suspects and not self.missing and alive == set(self._recorded().values())

    def _recorded(self) -> dict[str, str]:
        return {n.name: n.instance_id for n in self.state.nodes.values() if n.instance_id and n.state is not NodeState.TERMINATED}

    def _vanished(self, missing: dict[str, str]) -> None:
        """Marks the nodes whose instance this listing and the last both lack."""
        c = self.state
        gone = sorted(name for name, iid in missing.items() if self.missing.get(name) == iid)
        self.missing = {name: iid for name, iid in missing.items() if name not in gone}
        for name in gone:
            if name in c.marked:
                continue
            iid = missing[name]
            what = f"instance {iid} of node {name} is gone from the cloud (on neither of the last two listings)"
            log.warning("%s: replacing it now (state %s)", what, c.nodes[name].state.value)
            c.event("Node", name, "InstanceVanished", what, warning=True)
            c.mark_for_termination(name, what, "vanished")

    def _refresh_images(self, instances: list[Instance]) -> None:
        refresh = getattr(self.cloud, "refresh_images", None)  # a cloud that resolves images by query
        if refresh is None:
            return
        try:
            refresh({i.instance_type for i in instances if i.alive})
        except CloudError as exc:
            log.warning("boot image not resolved again (drift waits for it): %s", exc)
