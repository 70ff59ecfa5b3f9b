"""``Resources``: an immutable vector of integer resource amounts keyed by resource name.

Units: ``cpu`` in milli-cores, ``memory`` / storage in bytes, everything else a count.
Absent names are zero; zero entries are never stored, so equal vectors compare and
hash equal (pods with equal requests fall into one equivalence class by hash).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from nodemanager.errors import InvalidManifest
from nodemanager.model.quantity import format_quantity, resource_amount

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
GPU_RESOURCES = (NVIDIA_GPU, AMD_GPU)
BATCH_CPU = "kubernetes.io/batch-cpu"  # reclaimed milli-cores offered to batch pods (a count)
BATCH_MEMORY = "kubernetes.io/batch-memory"  # reclaimed bytes offered to batch pods
BATCH_RESOURCES = (BATCH_CPU, BATCH_MEMORY)


class Resources:
    """An immutable resource vector. Arithmetic is element-wise and exact."""

    __slots__ = ("_amounts", "_hash")

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        self._amounts: dict[str, int] = {k: int(v) for k, v in (amounts or {}).items() if v}
        self._hash: int | None = None

    @classmethod
    def _of(cls, amounts: dict[str, int]) -> Resources:
        """The vector of ``amounts``, a dict of ints its caller made and hands over (what
        arithmetic makes): kept as it is, zeros left out, without ``__init__``'s conversion
        of each, and without a copy where there is no zero (as sums of requests mostly are)."""
        out = object.__new__(cls)
        out._amounts = {k: v for k, v in amounts.items() if v} if 0 in amounts.values() else amounts
        out._hash = None
        return out

    @classmethod
    def parse(cls, quantities: Mapping[str, object] | None, field: str = "resources") -> Resources:
        """Parse ``{"cpu": "500m", "memory": "1Gi"}``; errors name ``field.<resource>``."""
        if not quantities:
            return ZERO
        if not isinstance(quantities, Mapping):
            raise InvalidManifest(field, f"expected a mapping of resource names, got {quantities!r}")
        return cls({str(k): resource_amount(str(k), v, f"{field}.{k}") for k, v in quantities.items()})

    # -- access -------------------------------------------------------------------------
    def get(self, name: str) -> int:
        return self._amounts.get(name, 0)

    __getitem__ = get

    @property
    def cpu(self) -> int:
        """Milli-cores."""
        return self._amounts.get(CPU, 0)

    @property
    def memory(self) -> int:
        """Bytes."""
        return self._amounts.get(MEMORY, 0)

    def cpu_memory(self) -> tuple[int, int]:
        """``(cpu, memory)`` in one call: asked of every node a pod is scored on."""
        amounts = self._amounts
        return amounts.get(CPU, 0), amounts.get(MEMORY, 0)

    @property
    def pods(self) -> int:
        return self._amounts.get(PODS, 0)

    def names(self) -> frozenset[str]:
        return frozenset(self._amounts)

    def has(self, name: str) -> bool:
        """Whether ``name`` is listed (perhaps at zero)."""
        return name in self._amounts

    def items(self) -> Iterator[tuple[str, int]]:
        return iter(sorted(self._amounts.items()))

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._amounts))

    def __len__(self) -> int:
        return len(self._amounts)

    def __bool__(self) -> bool:
        return bool(self._amounts)

    def is_nonnegative(self) -> bool:
        return all(v >= 0 for v in self._amounts.values())

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, other: Resources) -> Resources:
        out = dict(self._amounts)
        for k, v in other._amounts.items():
            out[k] = out.get(k, 0) + v
        return Resources._of(out)

    @classmethod
    def total(cls, vectors: Iterable[Resources], start: Resources | None = None) -> Resources:
        """``start`` plus every vector: one sum, not one new vector per addition."""
        out = dict(start._amounts) if start is not None else {}
        for vector in vectors:
            for k, v in vector._amounts.items():
                out[k] = out.get(k, 0) + v
        return cls._of(out)

    def __sub__(self, other: Resources) -> Resources:
        out = dict(self._amounts)
        for k, v in other._amounts.items():
            out[k] = out.get(k, 0) - v
        return Resources._of(out)

    def __mul__(self, factor: int) -> Resources:
        return Resources({k: v * factor for k, v in self._amounts.items()})

    __rmul__ = __mul__

    def max(self, other: Resources) -> Resources:
        """Element-wise maximum (how an init container bounds a pod's request)."""
        out = dict(self._amounts)
        for k, v in other._amounts.items():
            if v > out.get(k, 0):
                out[k] = v
        return Resources(out)

    def replaced(self, amounts: Mapping[str, int]) -> Resources:
        """These amounts, with those named in ``amounts`` set to theirs (a 0 clears one)."""
        return Resources._of({**self._amounts, **amounts})

    def clamp_nonnegative(self) -> Resources:
        return Resources({k: v for k, v in self._amounts.items() if v > 0})

    def only(self, *names: str) -> Resources:
        return Resources({k: v for k, v in self._amounts.items() if k in names})

    # -- comparison ---------------------------------------------------------------------
    def fits(self, capacity: Resources) -> bool:
        """True when every amount here is at most the same amount in ``capacity``."""
        cap = capacity._amounts
        for k, v in self._amounts.items():  # noqa: SIM110 (a loop: all() over a generator costs twice as much, for every node tried)
            if v > cap.get(k, 0):
                return False
        return True

    def fits_within(self, capacity: Resources, used: Resources) -> bool:
        """``self.fits(capacity - used)`` without making the difference."""
        cap, taken = capacity._amounts, used._amounts
        for k, v in self._amounts.items():  # noqa: SIM110 (as in fits)
            if v > cap.get(k, 0) - taken.get(k, 0):
                return False
        return True

    def copies_within(self, capacity: Resources, used: Resources) -> int | None:
        """How many copies of this vector fit in ``capacity - used`` (None: it asks for nothing)."""
        cap, taken = capacity._amounts, used._amounts
        count = None
        for k, v in self._amounts.items():
            if v > 0:
                n = (cap.get(k, 0) - taken.get(k, 0)) // v
                count = n if count is None or n < count else count
        return count

    def shortfall(self, capacity: Resources) -> list[str]:
        """The resource names on which this vector does not fit ``capacity``, sorted."""
        cap = capacity._amounts
        return sorted(k for k, v in self._amounts.items() if v > cap.get(k, 0))

    def __le__(self, other: Resources) -> bool:
        return self.fits(other)

    def __ge__(self, other: Resources) -> bool:
        return other.fits(self)

    def __lt__(self, other: Resources) -> bool:
        return self.fits(other) and self != other

    def __gt__(self, other: Resources) -> bool:
        return other.fits(self) and self != other

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resources) and self._amounts == other._amounts

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._amounts.items()))
        return self._hash

    # -- presentation -------------------------------------------------------------------
    def to_quantities(self) -> dict[str, str]:
        """Kubernetes spelling, e.g. ``{"cpu": "500m", "memory": "1Gi"}``."""
        return {k: format_quantity(k, v) for k, v in self.items()}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.to_quantities().items())
        return f"Resources({inner})"


ZERO = Resources()
# kube-scheduler's "non-zero" requests: what its scores count for a container's missing cpu or
# memory request (``nonzero_request``)
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 2**20
SCORING_DEFAULTS = {"cpu": DEFAULT_MILLI_CPU, "memory": DEFAULT_MEMORY}


_EVERY_NODE = frozenset({CPU, MEMORY, PODS, EPHEMERAL_STORAGE})  # what every node has some of


def extended(requests: Resources) -> tuple[str, ...]:
    """The resources asked for that not every node has (GPUs, batch capacity, ...), sorted:
    a node without one of them can never hold the request."""
    return tuple(sorted(n for n, v in requests._amounts.items() if v > 0 and n not in _EVERY_NODE))


def asks_for_batch(requests: Resources) -> bool:
    """Whether the requests name reclaimed batch capacity: such a pod is a batch pod."""
    amounts = requests._amounts  # zero amounts are never stored
    return BATCH_CPU in amounts or BATCH_MEMORY in amounts


def is_extended_resource(name: str) -> bool:
    """kube's ``IsExtendedResourceName``: a resource of a domain of its own (``example.com/foo``,
    ``nvidia.com/gpu``), not a native one (``cpu``, ``hugepages-2Mi``, anything under
    ``kubernetes.io/``) nor a quota's ``requests.`` name."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


@dataclass(frozen=True, slots=True)
class IgnoredResources:
    """Extended resources the fit filter leaves unchecked (NodeResourcesFit's
    ``ignoredResources`` and ``ignoredResourceGroups``: a name, or the domain before its
    ``/``): something other than kube-scheduler accounts for them."""

    names: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.names or self.groups)

    def strip(self, requests: Resources) -> Resources:
        """``requests`` without the ignored resources (itself where it names none)."""
        amounts = requests._amounts
        gone = [n for n in amounts if is_extended_resource(n) and (n in self.names or n.split("/", 1)[0] in self.groups)]
        return Resources._of({k: v for k, v in amounts.items() if k not in gone}) if gone else requests
