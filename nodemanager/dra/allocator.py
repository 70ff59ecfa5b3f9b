"""``Allocator``: find devices for resource claims on one node (the v0.32 structured allocator).

Depth-first over claims, then requests, then device slots; the first complete solution
wins. Devices of already allocated claims (and of claims reserved earlier in the same
computation) are taken. ``All`` requests fix their devices up front and fail on incomplete
pools; ExactCount requests treat an incomplete pool as "cannot allocate". Invalid input
(unknown class, a count over 32, a CEL error, an invalid slice selector) is fatal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodemanager.dra.cel import CelError, attribute_lookup, evaluate
from nodemanager.dra.model import (
    MAX_DEVICES_PER_CLAIM,
    AllocationMode,
    AllocationResult,
    Constraint,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    ResourceClaim,
    ResourceSlice,
)
from nodemanager.dra.pools import AllocationError, DevicePool, gather_pools
from nodemanager.model import Operator, Requirement, SelectorTerm

DeviceId = tuple[str, str, str]  # driver, pool, device


class _Stop(Exception):
    """An All-mode device cannot be used: the allocation cannot succeed (v0.32's errStop)."""


@dataclass(frozen=True)
class _Candidate:
    pool: DevicePool
    slice: ResourceSlice
    device: Device

    @property
    def id(self) -> DeviceId:
        return (self.pool.driver, self.pool.name, self.device.name)


@dataclass
class _ConstraintState:
    constraint: Constraint
    value: object = None
    count: int = 0

    def applies(self, request: str) -> bool:
        return not self.constraint.requests or request in self.constraint.requests

    def add(self, request: str, candidate: _Candidate) -> bool:
        if not self.applies(request):
            return True
        value = attribute_lookup(candidate.device, candidate.pool.driver, self.constraint.match_attribute)
        if value is None:
            return False
        if self.count and not (type(value) is type(self.value) and value == self.value):
            return False
        self.value = value
        self.count += 1
        return True

    def remove(self, request: str) -> None:
        if self.applies(request):
            self.count -= 1
            if self.count == 0:
                self.value = None


@dataclass
class Allocator:
    claims: Sequence[ResourceClaim]
    allocated: Iterable[ResourceClaim] = ()
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    slices: Sequence[ResourceSlice] = ()
    reserved: Iterable[DeviceId] = ()  # devices held by claims placed earlier in this computation

    def allocate(self, node_name: str, node_labels: Mapping[str, str] | None = None) -> list[AllocationResult] | None:
        """One result per claim, None when the node cannot satisfy them; raises AllocationError."""
        self._pools = gather_pools(self.slices, node_name, node_labels or {})
        self._in_use: set[DeviceId] = devices_of(c.allocation for c in self.allocated if c.allocation)
        self._in_use |= set(self.reserved)
        self._selectable: dict[tuple[DeviceId, str, str], bool] = {}
        self._plan: list[list[list[_Candidate] | int]] = []
        for claim in self.claims:
            self._plan.append([self._validate(claim, r) for r in claim.requests])
            total = sum(len(x) if isinstance(x, list) else x for x in self._plan[-1])
            if total > MAX_DEVICES_PER_CLAIM:
                raise AllocationError(f"claim {claim.key}: asks for {total} devices, more than the limit of {MAX_DEVICES_PER_CLAIM}")
        if any(plan == [] for plans in self._plan for plan in plans):
            return None  # All of no device at all: nothing to allocate it from (kube's table: all-devices-no-slices)
        self._states = [[_ConstraintState(c) for c in claim.constraints] for claim in self.claims]
        self._results: list[list[tuple[DeviceResult, _Candidate]]] = [[] for _ in self.claims]
        try:
            if not self._search(0, 0, 0):
                return None
        except _Stop:
            return None
        return [self._result(i, claim) for i, claim in enumerate(self.claims)]

    # -- validation ------------------------------------------------------------------------
    def _validate(self, claim: ResourceClaim, request: DeviceRequest) -> list[_Candidate] | int:
        """ExactCount: the count; All: the devices fixed up front."""
        if not request.device_class:
            raise AllocationError(f"claim {claim.key}, request {request.name}: empty deviceClassName")
        if request.device_class not in self.classes:
            raise AllocationError(f"claim {claim.key}, request {request.name}: device class {request.device_class!r} not found")
        if request.mode is AllocationMode.EXACT_COUNT:
            if request.count > MAX_DEVICES_PER_CLAIM:
                raise AllocationError(f"claim {claim.key}, request {request.name}: count {request.count} is too large (at most {MAX_DEVICES_PER_CLAIM})")
            return request.count
        fixed = []
        for pool in self._pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {claim.key}, request {request.name}: asks for all devices, but resource pool {pool.driver}/{pool.name} is currently being updated"
                )
            for candidate in self._candidates(pool):
                if self._is_selectable(claim, request, candidate):
                    fixed.append(candidate)
        return fixed

    def _candidates(self, pool: DevicePool) -> Iterable[_Candidate]:
        if pool.invalid:
            raise AllocationError(f"pool {pool.name} is invalid: {pool.invalid}")
        for s in sorted(pool.slices, key=lambda x: x.name):
            for device in s.devices:
                yield _Candidate(pool, s, device)

    def _is_selectable(self, claim: ResourceClaim, request: DeviceRequest, candidate: _Candidate) -> bool:
        key = (candidate.id, claim.key, request.name)
        cached = self._selectable.get(key)
        if cached is not None:
            return cached
        selectable = candidate.device.basic
        if selectable:
            for expression in (*self.classes[request.device_class].selectors, *request.selectors):
                try:
                    if not evaluate(expression, candidate.device, candidate.pool.driver):
                        selectable = False
                        break
                except CelError as exc:
                    raise AllocationError(f"claim {claim.key}, request {request.name}: selector {expression!r}: {exc}") from None
        self._selectable[key] = selectable
        return selectable

    # -- the search ------------------------------------------------------------------------
    def _search(self, ci: int, ri: int, slot: int) -> bool:
        if ci == len(self.claims):
            return True
        claim = self.claims[ci]
        if ri == len(claim.requests):
            return self._search(ci + 1, 0, 0)
        plan = self._plan[ci][ri]
        needed = len(plan) if isinstance(plan, list) else plan
        if slot == needed:
            return self._search(ci, ri + 1, 0)
        request = claim.requests[ri]
        if isinstance(plan, list):  # All: exactly this device, or nothing at all
            candidate = plan[slot]
            undo = self._take(ci, request, candidate, must=True)
            if undo is None:
                raise _Stop
            if self._search(ci, ri, slot + 1):
                return True
            undo()
            raise _Stop
        for pool in self._pools:
            if pool.incomplete:
                continue  # ExactCount: devices of a pool being updated are not offered
            for candidate in self._candidates(pool):
                if candidate.id in self._in_use and not request.admin_access:
                    continue
                if not self._is_selectable(claim, request, candidate):
                    continue
                undo = self._take(ci, request, candidate, must=False)
                if undo is None:
                    continue
                if self._search(ci, ri, slot + 1):
                    return True
                undo()
        return False

    def _take(self, ci: int, request: DeviceRequest, candidate: _Candidate, *, must: bool):  # type: ignore[no-untyped-def]
        """Allocate ``candidate``; returns the undo, or None when it cannot be used."""
        if candidate.id in self._in_use and not request.admin_access:
            return None
        states = self._states[ci]
        added: list[_ConstraintState] = []
        for state in states:
            if not state.add(request.name, candidate):
                for done in added:
                    done.remove(request.name)
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}: cannot add device {candidate.pool.driver}/{candidate.pool.name}/{candidate.device.name} "
                        f"because a claim constraint ({state.constraint.match_attribute}) would not be satisfied"
                    )
                return None
            added.append(state)
        if not request.admin_access:
            self._in_use.add(candidate.id)
        self._results[ci].append((DeviceResult(request.name, *candidate.id, admin_access=request.admin_access), candidate))

        def undo() -> None:
            self._results[ci].pop()
            if not request.admin_access:
                self._in_use.discard(candidate.id)
            for state in added:
                state.remove(request.name)

        return undo

    # -- results ---------------------------------------------------------------------------
    def _result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        chosen = self._results[ci]
        return AllocationResult(tuple(r for r, _ in chosen), self._node_selector(claim, [c for _, c in chosen]), self._config(claim))

    @staticmethod
    def _node_selector(claim: ResourceClaim, chosen: list[_Candidate]) -> tuple[SelectorTerm, ...] | None:
        """Where the devices are: the node of the first node-local one; else one term that
        holds every requirement of the network-attached devices' selectors (each must hold
        where the pod runs, as kube ANDs them); None (anywhere) when there are none."""
        named = next((c.slice.node_name for c in chosen if c.slice.node_name), "")
        if named:
            return (SelectorTerm((Requirement("metadata.name", Operator.IN, (named,), on_field=True),)),)
        requirements: dict[Requirement, None] = {}
        for c in chosen:
            if c.slice.node_selector is not None and not c.slice.all_nodes:
                if len(c.slice.node_selector) > 1:
                    raise AllocationError(f"claim {claim.key}: resource slice {c.slice.name} has a node selector with more than one term")
                requirements.update(dict.fromkeys(r for term in c.slice.node_selector for r in term.requirements))
        return (SelectorTerm(tuple(requirements)),) if requirements else None

    def _config(self, claim: ResourceClaim) -> tuple[Mapping[str, object], ...]:
        config = tuple({**cfg, "source": "FromClass"} for r in claim.requests for cfg in self.classes[r.device_class].config)
        return config + tuple({**cfg, "source": "FromClaim"} for cfg in claim.config)


def devices_of(results: Iterable[AllocationResult]) -> set[DeviceId]:
    """The devices these allocations take (one for admin access takes none: others may use it)."""
    return {(d.driver, d.pool, d.device) for r in results for d in r.devices if not d.admin_access}
