"""A controller on a simulated cloud and cluster, driven in virtual time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from builders import CATALOG, OD, SPOT, binpack_pool, cell_pool, pod

from cloud.base import CloudClient
from cloud.catalog import Catalog
from cloud.simulated import SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.cluster.arrivals import Arrival
from nodemanager.cluster.simulated import SimulatedCluster
from nodemanager.cluster.workload import ClusterObjects, workload_owner
from nodemanager.config.schema import Loops, NodeDefaults, Pool, ProviderConfig
from nodemanager.controller import InlineExecutor, NodeController
from nodemanager.controller.virtual import VirtualDriver
from nodemanager.model import NodeState

__all__ = ["OD", "SPOT", "Harness", "binpack_pool", "cell_pool", "pod"]


class Harness:
    def __init__(
        self,
        *pools: Pool,
        arrivals: list[Arrival] | None = None,
        boot_delay: float = 20.0,
        register_delay: float = 10.0,
        idle_grace: float = 30.0,
        boot_timeout: float = 300.0,
        healthy_timeout: float = 90.0,
        max_boots: int = 10,
        catalog: Catalog = CATALOG,
        resume_evicted: bool = False,
        objects: ClusterObjects | None = None,
        cloud: Callable[[VirtualClock], CloudClient] | None = None,
        **cloud_kw: object,
    ) -> None:
        self.catalog = catalog
        self.config = ProviderConfig(
            controller_id="test",
            pools=list(pools) or [cell_pool()],
            nodes=NodeDefaults(
                default_instance_type="a.large",
                idle_grace=idle_grace,
                boot_timeout=boot_timeout,
                healthy_timeout=healthy_timeout,
                max_boots_per_loop=max_boots,
                name_tag="nm",
            ),
            loops=Loops(pool=7, heartbeat=10, reaper=10, orphan_gc=60),
        )
        self.clock = VirtualClock(1000.0)
        self.cloud = cloud(self.clock) if cloud else SimulatedCloud("test", self.clock, boot_delay=boot_delay, **cloud_kw)  # type: ignore[arg-type]
        self.cluster = SimulatedCluster(self.clock, self.cloud, arrivals or [], register_delay=register_delay, resume_evicted=resume_evicted, objects=objects)
        self.controller = self.new_controller()

    def new_controller(self) -> NodeController:
        """A fresh controller process over the same cloud and cluster (a restart)."""
        controller = NodeController(self.config, self.catalog, self.cloud, self.cluster, self.clock, executor=InlineExecutor())
        controller.recover()
        self.driver = VirtualDriver(controller, self.clock, self.config.loops.intervals())
        self.controller = controller
        return controller

    def run(self, seconds: float) -> None:
        self.driver.run_for(seconds)

    def states(self) -> dict[str, NodeState]:
        return {n: node.state for n, node in self.controller.state.nodes.items()}

    def live_instances(self) -> list[str]:
        return [i.instance_id for i in self.cloud.list_instances()]

    def bound(self) -> dict[str, str]:
        return {k: s.pod.node_name for k, s in self.cluster.pods.items() if s.pod.node_name}


def arrive(name: str, at: float = 0.0, duration: float | None = None, *, bare: bool = False, **kw: object) -> Arrival:
    """A workload's pod, made again when evicted (its controller is the workload) unless ``bare``."""
    made = pod(name, **kw)  # type: ignore[arg-type]
    return Arrival(at, duration, made if bare else dataclasses.replace(made, owner=workload_owner(name, duration)))


__all__ += ["arrive"]
