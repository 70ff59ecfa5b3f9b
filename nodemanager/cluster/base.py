"""``ClusterSource``: the edge to the cluster. It only emits events and carries out binds;
the cache and the controller decide everything else."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

from nodemanager.dra.context import DeviceContext
from nodemanager.dra.model import AllocationResult
from nodemanager.errors import NodeManagerError
from nodemanager.model import Pod, PodKey, Resources, Taint
from nodemanager.model.daemonset import DaemonSet
from nodemanager.model.pdb import PodDisruptionBudget
from nodemanager.model.pod_owners import Namespace, PodSelecting
from nodemanager.model.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from nodemanager.noderesource.model import NodeMetric


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True)
class ClusterNode:
    """A node as the cluster reports it (a registered kubelet)."""

    name: str
    instance_id: str = ""  # from the providerID
    ready: bool = False
    last_heartbeat: float = 0.0
    unschedulable: bool = False  # cordoned
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Resources = field(default_factory=Resources)
    taints: tuple[Taint, ...] = ()  # spec.taints: the cluster's word on what may land here
    do_not_disrupt: bool = False  # annotated nodemanager.io/do-not-disrupt: "true"

    def with_heartbeat(self, at: float) -> ClusterNode:
        """The same node, heartbeating at ``at``."""
        return replace(self, last_heartbeat=at)

    # With the Kubernetes source every Lease renewal (each node every 10 s) makes a new node
    # to compare with the last, so field by field (``==`` took most of that handling).
    def same_but_heartbeat(self, other: ClusterNode) -> bool:
        """Whether ``other`` differs from this node at most in its heartbeat (a heartbeat's
        copy shares every other field's object: compared by identity first)."""
        theirs = other.__dict__
        for name, value in self.__dict__.items():  # noqa: SIM110 (a loop: all() over a generator costs a third more, at every heartbeat)
            if value is not theirs[name] and name != "last_heartbeat" and value != theirs[name]:
                return False
        return True


@dataclass(frozen=True)
class PodEvent:
    type: EventType
    pod: Pod


@dataclass(frozen=True)
class NodeEvent:
    type: EventType
    node: ClusterNode


ClusterObject = DaemonSet | PersistentVolumeClaim | PersistentVolume | StorageClass | Namespace | PodSelecting | PodDisruptionBudget


@dataclass(frozen=True)
class ObjectEvent:
    """Another kind the scheduler reads: DaemonSets (what every node runs), the volume
    objects (where claims let pods go), namespaces (their labels) and the objects that
    select pods (for default spread). ``key`` is "namespace/name" or the name."""

    type: EventType
    key: str
    obj: ClusterObject


@dataclass(frozen=True)
class Heartbeats:
    """Kubelets that renewed their node Leases at ``at``, by node name: nothing else of
    those nodes changed, so no node is made anew for it (a copy of every node at every beat
    was a tenth of a large simulation). The simulated cluster sends one per poll for every
    node whose beat was due, rather than a node event each (at 900 nodes, 90 beats a
    second); readers keep the time apart from the node (``ClusterEventsHandler.heartbeats``)."""

    at: float
    names: tuple[str, ...]


ClusterEvent = PodEvent | NodeEvent | ObjectEvent | Heartbeats


@dataclass(frozen=True)
class DrainStatus:
    """How far a drain got: done once no evictable pod is left running on the node."""

    done: bool
    evicting: int = 0  # pods evicted and still terminating
    blocked: tuple[str, ...] = ()  # pods whose eviction was refused, with why

    def __str__(self) -> str:
        if self.done:
            return "drained"
        return f"{self.evicting} pod(s) terminating" + (f"; blocked: {'; '.join(self.blocked)}" if self.blocked else "")


class BindError(NodeManagerError):
    """The cluster refused a bind (already bound, pod gone, node not ready)."""

    def __init__(self, pod: PodKey, node: str, reason: str) -> None:
        self.pod = pod
        self.node = node
        self.reason = reason
        super().__init__(f"binding {pod} to {node} refused: {reason}")


Mapper = Callable[[Callable[[tuple[PodKey, str]], str | Exception], Iterable[tuple[PodKey, str]]], Iterator[str | Exception]]


def bind_each(bind: Callable[[PodKey, str], str], binds: Sequence[tuple[PodKey, str]], mapper: Mapper = map) -> list[str | Exception]:
    """``bind`` over ``binds`` through ``mapper`` (``map``, or a thread pool's): each outcome
    kept, a refusal as its exception, so one failed bind never hides what the others did."""

    def one(pair: tuple[PodKey, str]) -> str | Exception:
        try:
            return bind(*pair)
        except Exception as exc:  # whatever it was, the caller must learn the pod is not bound
            return exc

    return list(mapper(one, binds))


class ClusterSource(Protocol):
    schedules_pods: bool  # True: the controller binds pods; False: another scheduler does
    publishes_status: bool  # whether publish_status shows anything to anyone (a real cluster's ConfigMap)

    def list(self) -> list[ClusterEvent]:
        """Everything that exists now, as ADDED events; the stream continues from here
        (a LIST before a WATCH: what a starting or restarted controller reads first)."""
        ...

    def poll(self) -> list[ClusterEvent]:
        """Everything that happened since the last list or poll, in order."""
        ...

    def bind(self, pod: PodKey, node: str) -> str:
        """Bind a pending pod to a node; raises BindError. The watch confirms it. Returns the
        name the cluster knows the node by (a kubelet names its Node)."""
        ...

    def bind_all(self, binds: Sequence[tuple[PodKey, str]]) -> list[str | Exception]:
        """Bind each pod to its node (as ``bind``, in any order or at once); what each did, in
        the order given: the Node's name, or the error that refused it."""
        ...

    def remove_node(self, name: str) -> None:
        """Delete the Node object of an instance that was terminated."""
        ...

    def drain(self, name: str) -> DrainStatus:
        """Cordon the node and evict its pods (honouring disruption budgets); called again
        until done. Never raises for a refused eviction: it is reported in the status."""
        ...

    def label_node(self, name: str, labels: Mapping[str, str]) -> None:
        """Make sure a registered node carries these labels (the well-known ones)."""
        ...

    def record_event(self, kind: str, key: str, reason: str, message: str, *, warning: bool = False) -> None:
        """Tell the cluster's users why: an event on a pod ("namespace/name") or a node."""
        ...

    def publish_status(self, text: str) -> None:
        """Show a short status where the cluster's users look (a ConfigMap ``kubectl get``
        shows, as the Cluster Autoscaler keeps one)."""
        ...

    def node_metrics(self) -> Mapping[str, NodeMetric]:
        """Current usage per node (the metrics API, or the simulation's profiles)."""
        ...

    def devices(self) -> DeviceContext | None:
        """Device classes, resource claims and published resource slices, if any."""
        ...

    def allocate_claim(self, claim: str, node: str, result: AllocationResult) -> None:
        """Record a claim's allocation (the claim's status), once its pod is bound."""
        ...
