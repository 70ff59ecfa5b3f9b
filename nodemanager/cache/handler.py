"""``ClusterEventsHandler``: the cluster cache, fed only by events (and our own assumes).

It keeps waiting pods, assumed and added pods per node (with their requested totals), and
the nodes the cluster reports. The scaler reads ``snapshot()``: an immutable picture in
which assumed pods already sit on their nodes.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType

from nodemanager.cache.key_ordered import KeyOrdered
from nodemanager.cache.pod_state import PodOp, PodState, next_state
from nodemanager.cluster.base import ClusterEvent, ClusterNode, ClusterObject, EventType, Heartbeats, NodeEvent, ObjectEvent, PodEvent
from nodemanager.model import Pod, PodKey, PodPhase, Resources
from nodemanager.model.by_node import PodsByNode
from nodemanager.model.daemonset import DaemonSet
from nodemanager.model.journal import Journal
from nodemanager.model.pdb import PodDisruptionBudget
from nodemanager.model.pod_owners import SELECTING_KINDS, Namespace, PodSelecting
from nodemanager.model.since import Since
from nodemanager.model.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeContext

DEFAULT_ASSUME_TTL = 15 * 60.0  # seconds (godel-scheduler's PodAssumedTTL)


_KEY = attrgetter("key")
_NO_KEYS: frozenset[PodKey] = frozenset()


def _itself(pod: Pod) -> Pod:
    return pod


@dataclass
class _Entry:
    pod: Pod  # node_name is the assumed or the bound node
    state: PodState
    deadline: float | None = None  # set once the bind call returned (FinishBinding)


@dataclass
class NodeUsage:
    """What the cache knows runs on a node: assumed and added pods. ``pods`` are the ones
    the node is for; DaemonSet and mirror pods (``node_pods``) only take room."""

    pods: set[PodKey] = field(default_factory=set)
    requested: Resources = field(default_factory=Resources)
    node_pods: set[PodKey] = field(default_factory=set)


@dataclass
class _OnNode:
    """The cache's own record of a node's pods (``NodeUsage`` is made from it when asked)."""

    pods: dict[PodKey, Pod] = field(default_factory=dict)  # assumed and added, DaemonSet and mirror pods too
    requested: Resources = field(default_factory=Resources)


@dataclass(frozen=True)
class CacheSnapshot:
    pods: tuple[Pod, ...]  # waiting pods, then assumed and added ones on their nodes
    nodes: Mapping[str, ClusterNode]
    generation: int
    grouped: PodsByNode | None = field(default=None, compare=False, repr=False)  # ``pods`` by node (None: group them when asked)
    daemon_sets: tuple[DaemonSet, ...] = ()
    volumes: VolumeContext | None = None  # None: the cluster has no volume objects
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # labels by namespace
    pod_selecting: tuple[PodSelecting, ...] = ()  # Services, RCs, ReplicaSets, StatefulSets
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    claims: bool = False  # some pod uses a resource claim


def _same_place(old: Pod, new: Pod) -> bool:
    """The two copies of a pod count alike on the same node."""
    return old.node_name == new.node_name and old.of_node == new.of_node and old.requests == new.requests


class ClusterEventsHandler:
    def __init__(self, assume_ttl: float = DEFAULT_ASSUME_TTL) -> None:
        self.assume_ttl = assume_ttl
        self._lock = threading.RLock()
        self._entries: KeyOrdered[_Entry] = KeyOrdered(attrgetter("pod"))
        self._waiting: KeyOrdered[Pod] = KeyOrdered(_itself)
        self._on: dict[str, _OnNode] = defaultdict(_OnNode)
        self._held: dict[str, frozenset[PodKey]] = {}  # node -> the pods it is there for, frozen when they change (see held)
        self.held_changes = Journal()  # the nodes whose held pods changed
        # node -> its pods in key order, as the last snapshot grouped them; the nodes whose
        # pods changed since are sorted again when the next snapshot is made (see _pods)
        self._sorted: dict[str, tuple[Pod, ...]] = {}
        self._resort: set[str] = set()
        self._nodes: dict[str, ClusterNode] = {}
        # node -> when it last heartbeat: its own word (the Ready condition's, the Lease's) or
        # the latest Heartbeats naming it, whichever is later (see Heartbeats); a live view
        self._beats: dict[str, float] = {}
        self.heartbeats: Mapping[str, float] = MappingProxyType(self._beats)
        self._objects: dict[type, dict[str, ClusterObject]] = defaultdict(dict)
        # What snapshots show of the objects and the Nodes, made again only when they change
        # (every decision takes a snapshot; they change rarely): (version, what is shown).
        self._objects_version = self._nodes_version = 0
        self._objects_shown: tuple[int, tuple] | None = None
        self._nodes_shown: tuple[int, Mapping[str, ClusterNode]] | None = None
        self.generation = 0
        self.node_changes = Journal()  # the names of the Nodes that changed other than by their heartbeats
        self._assumed: dict[PodKey, None] = {}  # the entries in state Assumed, in the order they were assumed
        self._pods_as_of: tuple[int, PodsByNode, bool] | None = None  # see _pods
        self.finished: list[Pod] = []  # pods that left a node since the last take_finished()
        self.bound: list[Pod] = []  # waiting pods placed (assumed or seen bound) since the last take_bound()

    # -- the state machine ----------------------------------------------------------------
    def state(self, key: PodKey) -> PodState:
        entry = self._entries.get(key)
        return entry.state if entry else PodState.INITIAL

    def _move(self, key: PodKey, op: PodOp) -> PodState:
        state = next_state(key, self.state(key), op)
        if state is PodState.ASSUMED:
            self._assumed[key] = None
        else:
            self._assumed.pop(key, None)
        return state

    def _place(self, pod: Pod) -> None:
        on = self._on[pod.node_name]
        on.pods[pod.key] = pod
        on.requested = on.requested + pod.requests
        self._resort.add(pod.node_name)
        if not pod.of_node:  # (the held keys change by one: a set made again in C, not from every pod)
            self._held[pod.node_name] = self._held.get(pod.node_name, _NO_KEYS) | {pod.key}
            self.held_changes.add(pod.node_name)

    def _replace(self, old: Pod | None, pod: Pod) -> None:
        """``pod`` counted on its node in place of ``old``, its cached copy (if any). Where
        both count alike on the same node (bound where it was assumed; a running pod's new
        status), the node's totals and the pods it is there for stay: only the copy changes."""
        if old is not None and _same_place(old, pod):
            self._on[pod.node_name].pods[pod.key] = pod
            self._resort.add(pod.node_name)
            return
        if old is not None:
            self._unplace(old)
        self._place(pod)

    def _unplace(self, pod: Pod) -> None:
        on = self._on[pod.node_name]
        del on.pods[pod.key]
        on.requested = on.requested - pod.requests
        self._resort.add(pod.node_name)
        if not pod.of_node:
            held = self._held[pod.node_name] - {pod.key}
            if held:
                self._held[pod.node_name] = held
            else:
                del self._held[pod.node_name]
            self.held_changes.add(pod.node_name)
        if not on.pods:
            del self._on[pod.node_name]

    def assume(self, pod: Pod, node: str) -> None:
        """Initial -> Assumed: the pod counts on ``node`` before the cluster confirms it."""
        with self._lock:
            state = self._move(pod.key, PodOp.ASSUME)
            placed = pod.living(node_name=node)
            if self._waiting.pop(pod.key, None) is not None:
                self.bound.append(pod)
            self._entries[pod.key] = _Entry(placed, state)
            self._place(placed)
            self.generation += 1

    def finish_binding(self, key: PodKey, now: float) -> None:
        """The bind call returned: the assumption now expires ``assume_ttl`` from ``now``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.state is PodState.ASSUMED:
                entry.deadline = now + self.assume_ttl

    def forget(self, key: PodKey) -> None:
        """Assumed -> Initial (the bind failed); a pod that is not assumed is left alone."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.state is not PodState.ASSUMED:
                return
            self._move(key, PodOp.FORGET)
            self._unplace(entry.pod)
            del self._entries[key]
            self._waiting[key] = entry.pod.living(node_name="", phase=PodPhase.PENDING)
            self.generation += 1

    def expire(self, now: float) -> list[PodKey]:
        """Assumed pods whose bind finished but was not confirmed by their deadline."""
        expired = []
        with self._lock:
            for key in list(self._assumed):  # in the order they were assumed, as they are among the entries
                entry = self._entries[key]
                if entry.deadline is not None and now >= entry.deadline:
                    self._move(key, PodOp.EXPIRE)
                    self._unplace(entry.pod)
                    del self._entries[key]
                    # Not confirmed, not denied: count it as waiting until the cluster says more.
                    self._waiting[key] = entry.pod.living(node_name="", phase=PodPhase.PENDING)
                    expired.append(key)
            if expired:
                self.generation += 1
        return expired

    def add(self, pod: Pod) -> None:
        """A bound pod seen in the cluster: Initial/Assumed/Expired -> Added."""
        with self._lock:
            state = self._move(pod.key, PodOp.ADD)
            old = self._entries.get(pod.key)
            if self._waiting.pop(pod.key, None) is not None:
                self.bound.append(pod)
            self._entries[pod.key] = _Entry(pod, state)
            self._replace(old.pod if old is not None else None, pod)  # the cached copy knows where we assumed it
            self.generation += 1

    def update(self, pod: Pod) -> None:
        with self._lock:
            self._move(pod.key, PodOp.UPDATE)
            old = self._entries[pod.key]
            self._entries[pod.key] = _Entry(pod, PodState.ADDED)
            self._replace(old.pod, pod)
            self.generation += 1

    def remove(self, key: PodKey) -> Pod:
        """Assumed/Added -> Deleted; returns the cached copy (it knows the node)."""
        with self._lock:
            self._move(key, PodOp.REMOVE)
            entry = self._entries.pop(key)
            self._unplace(entry.pod)
            self.generation += 1
            return entry.pod

    # -- events ----------------------------------------------------------------------------
    def apply(self, events: Iterable[ClusterEvent]) -> None:
        with self._lock:
            for event in events:
                if isinstance(event, PodEvent):
                    self._on_pod(event)
                elif isinstance(event, NodeEvent):
                    self._on_node(event)
                elif isinstance(event, Heartbeats):
                    self._on_heartbeats(event)
                else:
                    self._on_object(event)

    def _on_object(self, event: ObjectEvent) -> None:
        store = self._objects[type(event.obj)]
        if event.type is EventType.DELETED:
            store.pop(event.key, None)
        elif store.get(event.key) == event.obj:
            return
        else:
            store[event.key] = event.obj
        self._objects_version += 1
        self.generation += 1

    def _on_pod(self, event: PodEvent) -> None:
        pod, key, state = event.pod, event.pod.key, self.state(event.pod.key)
        stored = state in (PodState.ASSUMED, PodState.ADDED)
        if event.type is EventType.DELETED or pod.is_terminal:
            self._waiting.pop(key, None)
            if stored:
                self.finished.append(self.remove(key))
            self.generation += 1
            return
        if pod.node_name:
            if state is PodState.ADDED:
                if self._entries[key].pod.node_name != pod.node_name or self._entries[key].pod != pod:
                    self.update(pod)
            else:
                self.add(pod)
            return
        # An unbound pod: waiting. An assumed one stays assumed (our bind is in flight);
        # an added one lost its node and waits again.
        if state is PodState.ASSUMED:
            return
        if state is PodState.ADDED:
            self.finished.append(self.remove(key))
        if pod.of_node:  # its controller (or the kubelet) places it; never a pod to place
            self._waiting.pop(key, None)
            self.generation += 1
            return
        self._waiting[key] = pod
        self.generation += 1

    def _on_heartbeats(self, event: Heartbeats) -> None:
        """The nodes' heartbeats move on (never back); nothing the scaler looks at changes
        (no generation)."""
        beats, at = self._beats, event.at
        for name in event.names:
            if beats.get(name, at) < at:  # (a node the cache does not know has none)
                beats[name] = at

    def _on_node(self, event: NodeEvent) -> None:
        name = event.node.name
        old = self._nodes.get(name)
        self._nodes_version += 1
        if event.type is EventType.DELETED:
            self._nodes.pop(name, None)
            self._beats.pop(name, None)
        else:
            self._nodes[name] = event.node
            if self._beats.get(name, -math.inf) < event.node.last_heartbeat:
                self._beats[name] = event.node.last_heartbeat
        # A heartbeat alone changes nothing the scaler looks at: no new generation for it.
        if old is None or event.type is EventType.DELETED or not old.same_but_heartbeat(event.node):
            self.generation += 1
            self.node_changes.add(name)

    # -- reading ---------------------------------------------------------------------------
    def snapshot(self) -> CacheSnapshot:
        with self._lock:
            grouped, claims = self._pods()
            if self._nodes_shown is None or self._nodes_shown[0] != self._nodes_version:
                self._nodes_shown = (self._nodes_version, MappingProxyType(dict(self._nodes)))
            if self._objects_shown is None or self._objects_shown[0] != self._objects_version:
                self._objects_shown = (self._objects_version, self._objects_now())
            daemon_sets, volumes, namespaces, selecting, pdbs = self._objects_shown[1]
            return CacheSnapshot(grouped.pods, self._nodes_shown[1], self.generation, grouped, daemon_sets, volumes, namespaces, selecting, pdbs, claims)

    def _objects_now(self) -> tuple:
        """The objects as a snapshot shows them: DaemonSets, volumes, namespaces' labels,
        the pod-selecting objects and PodDisruptionBudgets (none of them changed by anyone)."""
        daemon_sets = tuple(obj for _, obj in sorted(self._objects[DaemonSet].items()) if isinstance(obj, DaemonSet))
        namespaces = MappingProxyType({name: ns.labels for name, ns in self._objects[Namespace].items() if isinstance(ns, Namespace)})
        selecting = tuple(o for kind in SELECTING_KINDS for _, o in sorted(self._objects[kind].items()) if isinstance(o, PodSelecting))
        pdbs = tuple(b for _, b in sorted(self._objects[PodDisruptionBudget].items()) if isinstance(b, PodDisruptionBudget))
        return daemon_sets, self._volume_context(), namespaces, selecting, pdbs

    def _volume_context(self) -> VolumeContext | None:
        claims, volumes, classes = (dict(self._objects[kind]) for kind in (PersistentVolumeClaim, PersistentVolume, StorageClass))
        if not (claims or volumes or classes):
            return None
        return VolumeContext(claims, volumes, classes)  # type: ignore[arg-type]

    def has_claims(self) -> bool:
        """Whether any pod, waiting or placed, uses a resource claim (device objects matter)."""
        with self._lock:
            return self._pods()[1]

    def _pods(self) -> tuple[PodsByNode, bool]:
        """The snapshot's pods (waiting, then placed, each by key) grouped by node, and
        whether any uses a resource claim: made once per generation (every pod change makes
        a new one); only the nodes whose pods changed are grouped again (a walk over every
        node for each snapshot was a twentieth of a large simulation)."""
        if self._pods_as_of is None or self._pods_as_of[0] != self.generation:
            waiting = self._waiting.pods()
            pods = waiting + self._entries.pods()
            placed, before = self._sorted, self._pods_as_of[1].placed if self._pods_as_of is not None else None
            for name in self._resort:
                on = self._on.get(name)
                if on is None:
                    placed.pop(name, None)
                else:
                    placed[name] = tuple(sorted(on.pods.values(), key=_KEY))
            after = dict(placed)
            since = Since(before, after, {name: placed.get(name) for name in self._resort}) if before is not None else None
            self._resort.clear()
            claims = self._waiting.claimed > 0 or self._entries.claimed > 0
            self._pods_as_of = (self.generation, PodsByNode(pods, waiting, after, since), claims)
        return self._pods_as_of[1], self._pods_as_of[2]

    def held(self, node: str) -> frozenset[PodKey]:
        """The pods ``node`` holds, assumed or added, besides its DaemonSet and mirror pods:
        the same set object until they change (``held_changes`` names the nodes whose did)."""
        return self._held.get(node, _NO_KEYS)

    def usage(self, node: str) -> NodeUsage:
        with self._lock:
            found = self._on.get(node)
            if found is None:
                return NodeUsage()
            return NodeUsage({k for k, p in found.pods.items() if not p.of_node}, found.requested, {k for k, p in found.pods.items() if p.of_node})

    def node(self, name: str) -> ClusterNode | None:
        return self._nodes.get(name)

    def waiting(self) -> list[Pod]:
        with self._lock:
            return list(self._waiting.pods())

    def pod(self, key: PodKey) -> Pod | None:
        with self._lock:
            entry = self._entries.get(key)
            return entry.pod if entry else self._waiting.get(key)

    def is_waiting(self, key: PodKey) -> bool:
        """The pod is known and waits for a node (neither bound nor assumed)."""
        with self._lock:
            return key in self._waiting

    def waiting_count(self) -> int:
        with self._lock:
            return len(self._waiting)

    def counts(self) -> dict[str, int]:
        with self._lock:
            out = {"waiting": len(self._waiting), "assumed": 0, "added": 0}
            for entry in self._entries.values():
                out[entry.state.value.lower()] += 1
            return out

    def take_bound(self) -> list[Pod]:
        """The waiting pods placed since the last call (each once, however it was placed)."""
        with self._lock:
            bound, self.bound = self.bound, []
        return bound

    def take_finished(self) -> list[Pod]:
        with self._lock:
            done, self.finished = self.finished, []
            return done
