"""Small builders for scaler and controller tests: a tiny catalog, pods, nodes, pools."""

from __future__ import annotations

from collections.abc import Mapping

from cloud.catalog import Catalog
from nodemanager.config.schema import NodeDefaults, Pool, Standby
from nodemanager.model import CapacityPolicy, CapacityType, InstanceType, Node, NodeName, NodeState, Pod, PodPhase, Resources
from nodemanager.model.since import Since
from nodemanager.scaler import BindingNodeScaler, ScalerSettings
from nodemanager.scaler.decision import NodeSpec

ZONES = ("zone-1a", "zone-1b")
# Two cell-sized types (the reference tables' "A" and "B") and a ladder for bin packing.
TYPES = (
    InstanceType("a.large", 2, 8192, 0.10, spot_price=0.04, zones=ZONES, max_pods=29),
    InstanceType("b.large", 2, 8192, 0.12, spot_price=0.05, zones=ZONES, max_pods=29),
    InstanceType("m.xlarge", 4, 16384, 0.20, spot_price=0.08, zones=ZONES, max_pods=58),
    InstanceType("m.4xlarge", 16, 65536, 0.80, spot_price=0.32, zones=ZONES, max_pods=110),
    InstanceType("g.xlarge", 4, 16384, 0.90, zones=ZONES, max_pods=29, gpus=()),
)
CATALOG = Catalog(TYPES, region="zone-1")
OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT


def pod(
    name: str,
    cpu: str = "100m",
    memory: str = "128Mi",
    *,
    itype: str = "",
    policy: CapacityPolicy = CapacityPolicy.ANY,
    zone: str = "",
    selector: dict[str, str] | None = None,
    priority: int = 0,
    created: float = 0.0,
    phase: PodPhase = PodPhase.PENDING,
    node: str = "",
    group: str = "",
    min_member: int = 0,
    extra: dict[str, int] | None = None,
    do_not_disrupt: bool = False,
) -> Pod:
    requests = Resources.parse({"cpu": cpu, "memory": memory}) + Resources(extra or {})
    return Pod(
        "default",
        name,
        f"uid-{name}",
        requests,
        created_at=created,
        priority=priority,
        phase=phase,
        node_name=node,
        node_selector=selector or {},
        instance_type=itype,
        capacity_policy=policy,
        zone=zone,
        pod_group=group,
        pod_group_min_member=min_member,
        do_not_disrupt=do_not_disrupt,
    )


def node(
    name: str,
    itype: str = "a.large",
    *,
    pool: str = "cells",
    capacity: CapacityType = OD,
    zone: str = "zone-1a",
    state: NodeState = NodeState.AVAILABLE,
    bound: tuple[str, ...] = (),
) -> Node:
    return Node(
        NodeName(name),
        pool,
        itype,
        capacity,
        zone,
        allocatable=CATALOG[itype].allocatable,
        state=state,
        instance_id=f"i-{name}",
        bound_pods=tuple(f"default/{b}" for b in bound),
    )


def booted(spec: NodeSpec) -> Node:
    """The node a decision's ``spec`` became, registered and available."""
    labels = spec.labels
    return Node(spec.name, spec.pool, spec.instance_type, spec.capacity_type, spec.zone, allocatable=spec.allocatable, state=NodeState.AVAILABLE, labels=labels)


def cell_pool(name: str = "cells", standby: list[Standby] | None = None, **kw: object) -> Pool:
    return Pool(**{"name": name, "packing": "cell", "instance_types": ["a.large", "b.large"], "capacity_types": [OD, SPOT], "standby": standby or [], **kw})


def binpack_pool(name: str = "general", **kw: object) -> Pool:
    return Pool(**{"name": name, "packing": "binpack", "instance_types": ["a.large", "m.*"], "capacity_types": [OD], **kw})


def scaler(*pools: Pool, idle_grace: float = 0.0, max_boots: int = 10, catalog: Catalog = CATALOG) -> BindingNodeScaler:
    nodes = NodeDefaults(default_instance_type="a.large", idle_grace=idle_grace, max_boots_per_loop=max_boots, name_tag="nm")
    return BindingNodeScaler(ScalerSettings(tuple(pools) or (cell_pool(),), nodes), catalog)


def since_holds(since: Since | None, before: Mapping, after: Mapping) -> bool:
    """Whether ``since`` (if it links the two) names every entry that changed, with its new value."""
    if since is None:
        return True
    differ = {n for n in before.keys() | after.keys() if before.get(n) is not after.get(n)}
    return differ <= since.changed.keys() and all(after.get(n) is v for n, v in since.changed.items())
