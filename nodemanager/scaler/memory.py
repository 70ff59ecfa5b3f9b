"""What the scaler keeps from one computation to the next: caches of pure functions
of the pools, offerings and pods (kept by their inputs' identity, checked at each use), the
node pictures, and the plan past the last boot cap.

Nothing here is carried *state* a decision depends on: a fresh ``Memory`` gives the same
decisions, only more slowly (the deferred plan is reused only when everything it was made
from is unchanged)."""

from __future__ import annotations

from collections.abc import Sequence

from cloud.catalog import Catalog
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scaler import binpack
from nodemanager.scaler.by_identity import ByIdentity
from nodemanager.scaler.deferred import DeferredPlan
from nodemanager.scaler.live_nodes import LiveNodes
from nodemanager.scaler.pictures import NodePictures
from nodemanager.scaler.pools import Candidate, PoolView, pool_views
from nodemanager.scaler.settings import ScalerSettings
from nodemanager.scheduling import Framework, Registry
from nodemanager.scheduling.plugins import BUILTIN_PLUGINS

PROBE_MEMO_SIZE = 4096
REGULAR_KEPT = 65536  # waiting batch pods whose copy with regular requests is kept (see Memory.regular_pods)


class Memory:
    """The scaler's caches and the node pictures, shared by its computations."""

    def __init__(self, settings: ScalerSettings, catalog: Catalog, registry: Registry | None = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self.registry = registry
        self.framework = Framework(settings.profile, registry, settings.seed)  # each decision runs a fresh copy
        # Whether pods a computation placed on an existing node may stay there for the next
        # (see ``existing.keep_placed``): every plugin is one of ours, whose answers for such
        # pods this project knows.
        self.keeps_placed = all(type(p) in BUILTIN_PLUGINS for p in self.framework.plugins.values())
        self.regular_pods: ByIdentity[Pod, Pod] = ByIdentity(REGULAR_KEPT)  # a batch pod -> it as_regular (the same copy while it waits)
        self.planned_pods: ByIdentity[Pod, Pod] = ByIdentity(REGULAR_KEPT)  # a waiting pod -> settings.as_planned of it (likewise)
        self.strict_pods: ByIdentity[Pod, Pod] = ByIdentity(REGULAR_KEPT)  # a pod a what-if moves -> preferences.strictest of it (likewise)
        self.views = pool_views(list(settings.pools), catalog, settings.nodes.volume_size, settings.colocation)
        self._views_daemon_sets: tuple = ()
        # (pool, pod constraints) -> accepted offerings: the same answer every time, so it
        # is kept across computations (a cache of a pure function, not carried state).
        self.probe_memo: dict[tuple, tuple[tuple[Candidate, ...], str, bool]] = {}
        # What the packer derives from a list of offerings, and the largest allocatables of
        # one, are pure functions of the offerings (their prices included) too.
        self.type_tables = binpack.TypeTables()
        self.frontiers: ByIdentity[Sequence[Candidate], list[Resources]] = ByIdentity(binpack.TABLES_KEPT)  # offerings -> their frontier
        # offerings -> (instance type's id, capacity type) -> those offerings: where a new node may go
        self.by_type: ByIdentity[Sequence[Candidate], dict[tuple[int, CapacityType], list[Candidate]]] = ByIdentity(binpack.TABLES_KEPT)
        # (offerings' id, zone, capacity type, extended resources) -> (the offerings, those of
        # that zone and capacity type with those resources): what right-sizing looks through
        self.domains: dict[tuple, tuple[Sequence[Candidate], list[Candidate]]] = {}
        # offerings -> (whole vCPU floor, GiB per CPU) -> those of at least that many vCPU and
        # suited to that mix: the same list object each time, so what the packer derives from
        # it is kept too (see sizing.floored)
        self.floored: ByIdentity[Sequence[Candidate], dict[tuple[int, float], list[Candidate]]] = ByIdentity(binpack.TABLES_KEPT)
        self.pod_keys: dict[tuple[int, bool], tuple[Pod, tuple]] = {}  # (id(pod), node_only) -> (the pod, its constraint_key)
        # each existing node as computations start from it
        self.pictures = NodePictures(catalog, settings.nodes.volume_size, self._views_daemon_sets, regular=not settings.colocation)
        self.live = LiveNodes()  # the live nodes with their pictures, followed by what changed
        # The nodes the last capped plan left for later, reused while what they were planned
        # from stays the same (checked in full before each use; see ``deferred``).
        self.deferred: DeferredPlan | None = None

    def views_for(self, daemon_sets: tuple) -> list[PoolView]:
        """The pools' offerings net of these DaemonSets, and the node pictures allowing for
        them (both rebuilt only when they change)."""
        if daemon_sets != self._views_daemon_sets:
            settings = self.settings
            self.views = pool_views(list(settings.pools), self.catalog, settings.nodes.volume_size, settings.colocation, daemon_sets)
            self._views_daemon_sets = daemon_sets
            self.probe_memo.clear()
            self.type_tables = binpack.TypeTables()
            self.frontiers.clear()
            self.by_type.clear()
            self.domains.clear()
            self.floored.clear()
            self.pictures = NodePictures(self.catalog, settings.nodes.volume_size, daemon_sets, regular=not settings.colocation)
        return self.views
