"""What consolidation's planner asks about prices and sizes (``scaler/consolidation.py``'s
``Planner`` hooks): the cheaper sizes a pool offers for pods, the floors a what-if surely
keeps, each pool's price improvement factor, whether a node may take more pods, how
many cheaper spot types a node's pool has and needs, and what keeps a pod off a node besides
CPU and memory. Answered from the scaler's current offerings and settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from nodemanager.config.schema import Packing
from nodemanager.model import CapacityType, Node, Pod
from nodemanager.scaler import ClusterSnapshot
from nodemanager.scaler.consolidation import SPOT_TO_SPOT_CHOICES, CheaperSizes, Command, Needs, Planner

if TYPE_CHECKING:
    from nodemanager.controller.state import ClusterState


class ConsolidationPrices:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._sizes: CheaperSizes | None = None  # of the scaler's current views

    def planner(self, worth: Callable[[ClusterSnapshot, Command], str], promising: Callable[[ClusterSnapshot, Sequence[Node]], str]) -> Planner:
        """The planner of the state's scaler, asking these prices, and whether a move is
        ``worth`` its evictions (and ``promising`` before its what-if)."""
        state = self.state
        return Planner(
            state.what_if,
            state.price_of,
            self.spot_choices,
            spot_minimum=self.spot_minimum,
            sizes_below=self.sizes_below,
            takes_more=self.takes_more,
            own_nodes=self.own_nodes,
            price_factor=self.price_factor,
            floors=self.sure_floors,
            cheapest=self.cheapest,
            worth=worth,
            promising=promising,
            needs=self.needs,
        )

    def sizes_below(self, price: float, pods: Sequence[Pod]) -> list[tuple[int, int]]:
        return self._cheaper().below(price, pods)

    def cheapest(self, pods: Sequence[Pod], floors: Mapping[str, int], holding: tuple[int, int]) -> float:
        return self._cheaper().cheapest(pods, floors, holding)

    def sure_floors(self, snapshot: ClusterSnapshot, names: set[str], pods: Sequence[Pod]) -> dict[str, int]:
        return self.state.scaler.sure_floors(snapshot, names, pods)

    def own_nodes(self, pods: tuple[Pod, ...]) -> tuple[bool, ...]:
        return self._cheaper().own_nodes(pods)

    def _cheaper(self) -> CheaperSizes:
        views = self.state.scaler.views
        if self._sizes is None or self._sizes.views is not views:
            self._sizes = CheaperSizes(views, self.state.scaler.settings.device_asks)
        return self._sizes

    def needs(self, pod: Pod) -> Needs:
        """What keeps ``pod`` off a node besides CPU and memory, as the scaler's filters judge it."""
        return self.state.scaler.settings.node_needs(pod)

    def price_factor(self, nodes: Sequence[Node]) -> float:
        """The most demanding ``consolidationPriceImprovementFactor`` of the nodes' pools."""
        pools = [self.state.pool_config(n.pool) for n in nodes]
        return min((p.disruption.consolidation_price_improvement_factor for p in pools if p is not None), default=1.0)

    def takes_more(self, node: Node) -> bool:
        """Whether the node may hold another pod: a cell pool's never does."""
        pool = self.state.pool_config(node.pool)
        return pool is None or pool.packing is not Packing.CELL

    def spot_minimum(self, node: Node) -> int:
        """Cheaper spot types the node's pool needs before a spot-to-spot replacement."""
        pool = self.state.pool_config(node.pool)
        return pool.disruption.spot_to_spot_min_types if pool is not None else SPOT_TO_SPOT_CHOICES

    def spot_choices(self, node: Node) -> int:
        """Spot instance types the node's pool may buy for less than the node costs."""
        price = self.state.price_of(node)
        view = next((v for v in self.state.scaler.views if v.name == node.pool), None)
        return len({cand.itype.name for cand in view.candidates if cand.offering.capacity_type is CapacityType.SPOT and cand.price < price}) if view else 0
