"""The extension points. A plugin subclasses the interface of each point it serves.

Return ``None`` or a ``Status``; None counts as Success. The framework decides what a
non-success means at each point (see ``framework.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from nodemanager.model import Pod
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.status import SKIP, Code, Status

if TYPE_CHECKING:
    from nodemanager.scheduling.waiting import WaitingPod


class FrameworkHandle:
    """What plugins may see of the framework: the nodes being scheduled onto, the waiting
    pods and the decision time. Set by the framework's owner before a run."""

    def __init__(self) -> None:
        self.node_infos: Mapping[str, NodeInfo] = {}
        self.now: float = 0.0
        self.devices: object | None = None  # DynamicResources' DeviceState, set per computation
        self.volumes: object | None = None  # VolumeBinding's VolumeContext, set per computation
        self.topology: object | None = None  # PodTopology over node_infos, kept current by its owner
        self.possible_domains: Callable[[Pod, str], frozenset[str]] | None = None  # (pod, topology key) -> domains its owner could still create
        self._waiting: dict[str, WaitingPod] = {}

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._waiting.get(uid)

    def iterate_over_waiting_pods(self) -> Iterator[WaitingPod]:
        return iter(list(self._waiting.values()))


class Plugin:
    name: ClassVar[str] = ""
    # True for a plugin that keeps nothing of its own once made and never reads the handle:
    # one instance then serves every framework of a profile (``Framework.fresh``).
    keeps_nothing: ClassVar[bool] = False

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        self.handle = handle
        self.args = dict(args or {})


class QueueSortPlugin(Plugin):
    def less(self, a: Pod, b: Pod) -> bool:
        raise NotImplementedError

    def sort_key(self, pod: Pod) -> Any:
        """A key whose order is ``less``'s, if the plugin has one (sorting by a key asks once
        per pod, not twice per comparison); None: sort with ``less``."""
        return None


class PreFilterExtensions:
    """Incremental updates of PreFilter state when a pod is added to or removed from a node."""

    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status | None:
        return None

    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status | None:
        return None


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class SkipsUnasked(PreFilterPlugin):
    """A plugin with nothing to check for a pod that asks nothing of it: its PreFilter
    returns Skip for such a pod, so its Filter is not run (as kube's NodeAffinity,
    NodePorts, NodeVolumeLimits and DynamicResources do)."""

    def asks(self, pod: Pod) -> bool:
        raise NotImplementedError

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        return None if self.asks(pod) else SKIP


class FilterPlugin(Plugin):
    # A filter that depends on nothing but the pod and the node and that most nodes of a busy
    # cluster fail (their free room): ``Framework.feasible`` runs such filters first.
    sifts_first: ClassVar[bool] = False

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        raise NotImplementedError

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        """The nodes ``filter`` passes, in order (any other status, Error included, fails
        the node). A plugin overrides it where a look at the node settles most of them."""
        return [node for node in nodes if (status := self.filter(state, pod, node)) is None or status.code is Code.SUCCESS]


class PostFilterPlugin(Plugin):
    def post_filter(self, state: CycleState, pod: Pod, feasible: list[NodeInfo], filtered: Mapping[str, Status]) -> Status | None:
        raise NotImplementedError


class ScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """Optional (kube's PreScore for a plugin enabled at Score): Skip leaves the plugin's
        Score out for this pod, as when every node would score the same."""
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        raise NotImplementedError

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        """``score`` of each node by name, or the first status that is not a success."""
        scores: dict[str, int] = {}
        for node in nodes:
            value, status = self.score(state, pod, node)
            if status is not None and not status.is_success():
                return {}, status
            scores[node.name] = value
        return scores, None

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        """Optional: rescale the raw scores in place into [0, 100]."""
        return None


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise NotImplementedError


class UnreservePlugin(Plugin):
    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """A status and, with Wait, how long to wait in seconds (capped at 15 minutes)."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise NotImplementedError


class BindPlugin(Plugin):
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Skip passes the pod to the next bind plugin."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


#: Extension point name (as in provider.yaml) -> the interface its plugins implement.
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "unreserve": UnreservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
