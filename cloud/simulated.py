"""An in-memory cloud, driven by the injected clock: a product, not a test double.

Instances become ``running`` a boot delay after launch. Capacity can be limited per
offering (``type/capacity-type/zone`` globs), and failures are injected from one seeded
random stream: throttled calls, instances that die, spot interruptions. The same seed and
the same call times give the same history.
"""

from __future__ import annotations

import fnmatch
import heapq
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from cloud.base import BootRequest, Instance, InstanceState, PriceUpdate, launch_tags
from cloud.errors import InsufficientCapacity, LaunchRefused, NotFound, OfferingError, Throttled
from cloud.interruption import FREE_IF_RECLAIMED_WITHIN, SPOT_NOTICE, InterruptionKind, event_body
from nodemanager.clock import Clock
from nodemanager.model import CapacityType
from nodemanager.model.reservation import Reservation, ReservationQuery
from nodemanager.model.since import Since
from nodemanager.tally import ErrorTally

TERMINATED_VISIBLE_FOR = 3600.0  # EC2 keeps describing terminated instances for about an hour
MINIMUM_BILLED = 60.0  # EC2 bills each second an instance runs, a minute at least for each start


class SimulatedQueue:
    """The interruption queue of the simulated cloud: EventBridge's messages, in memory,
    each received once until deleted (a message not deleted is received again)."""

    def __init__(self) -> None:
        self._messages: dict[str, str] = {}  # receipt -> body, in arrival order
        self._receipts = itertools.count(1)

    def send(self, body: str) -> None:
        self._messages[f"r-{next(self._receipts)}"] = body

    def receive(self, wait: float) -> list[tuple[str, str]]:
        return list(self._messages.items())[:10]

    def delete(self, receipt: str) -> None:
        self._messages.pop(receipt, None)

    def __len__(self) -> int:
        return len(self._messages)


@dataclass
class _Record:
    instance: Instance
    terminated_at: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class BilledSpan:
    instance: Instance
    running: float  # when it was (or will be) running: its billing starts
    until: float  # when it was terminated (now, if it lives); ``running`` if it never ran
    seconds: float  # what EC2 bills: (until - running), a minute at least; 0 if free


class Listing(list[Instance]):
    """A listing that says what changed since the one before it (``since``, by instance id),
    so a poller of thousands of instances catches up by the few that changed. Only the
    newest listing says it: the cloud takes it off the one before."""

    since: Since[Instance] | None = None


@dataclass(frozen=True)
class CloudEvent:
    at: float
    kind: str  # "launched" | "terminated" | "died" | "spot-warning" | "spot-interrupted" | "capacity-block-reclaimed"
    instance_id: str
    node_name: str


class SimulatedCloud:
    def __init__(
        self,
        controller_id: str,
        clock: Clock,
        *,
        boot_delay: float = 30.0,
        seed: int = 0,
        capacity: Mapping[str, int] | None = None,
        throttle_rate: float = 0.0,
        death_per_hour: float = 0.0,
        spot_interruption_per_hour: float = 0.0,
        on_boot: Callable[[BootRequest, Instance], None] | None = None,
        image: str = "ami-simulated",
        reservations: Sequence[tuple[Reservation, float]] = (),
    ) -> None:
        self.controller_id = controller_id
        self.clock = clock
        self.boot_delay = boot_delay
        self.capacity = dict(capacity or {})
        self.throttle_rate = throttle_rate
        self.death_per_hour = death_per_hour
        self.spot_interruption_per_hour = spot_interruption_per_hour
        self.on_boot = on_boot  # called after launch, before returning: lets tests "crash" there
        self.image = image  # what every boot launches from; changing it makes the nodes drift
        self.errors = ErrorTally()  # failed calls, for /metrics
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)
        self._records: dict[str, _Record] = {}
        # Not terminated: what listings and failures walk. Ids are issued in increasing order
        # (a counter, zero-padded), so this is in id order without a sort.
        self._live: dict[str, _Record] = {}
        # The live instances as a listing shows them, kept as they change (a poll lists every
        # few seconds): a boot adds one, an end takes it out, and a pending one is looked at
        # again when its boot delay is over (``_due``: when, instance id).
        self._listed: dict[str, Instance] = {}
        self._listing: Listing | None = None  # the last listing made
        self._relisted: dict[str, Instance | None] = {}  # what changed in ``_listed`` since (None: gone)
        self._due: list[tuple[float, str]] = []
        self._by_token: dict[str, str] = {}
        self._checked_at: float | None = None
        self._reclaim: dict[str, float] = {}  # spot instance -> when it goes (two minutes after its warning)
        # Capacity reservations, each with when it starts: active from then until it ends
        # (its ``available`` is worked out from the instances in it).
        self._reservations = {r.id: (r, start) for r, start in reservations}
        self.interruptions = SimulatedQueue()
        self.events: list[CloudEvent] = []
        self.boot_calls = 0

    # -- CloudClient ----------------------------------------------------------------------
    def boot(self, request: BootRequest) -> Instance:
        self.boot_calls += 1
        self._check_throttle("RunInstances")
        known = self._by_token.get(request.token)
        if known is not None:
            return self._view(self._records[known])
        if request.reservation:
            self._check_reservation(request)
        # A fleet launch (alternatives given) takes the planned offering while it has
        # capacity, else the next of its offerings (cheapest first) that has.
        refused: list[OfferingError] = []
        for instance_type, zone in request.offerings():
            limit = self._capacity_limit(instance_type, request.capacity_type, zone)
            if limit is None or self._live_count(instance_type, request.capacity_type, zone) < limit:
                break
            refused.append(InsufficientCapacity(instance_type, request.capacity_type, zone, "simulated capacity exhausted"))
        else:  # the call fails (a fleet that launches something has not failed)
            self.errors.failed("CreateFleet" if request.alternatives else "RunInstances", "InsufficientInstanceCapacity")
            if not request.alternatives:
                raise refused[0]
            raise LaunchRefused(list(refused))
        now = self.clock.now()
        instance_id = f"i-{next(self._ids):017x}"
        tags = launch_tags(request, self.controller_id)
        offering = (instance_type, request.capacity_type, zone)
        instance = Instance(
            instance_id, request.node_name, request.pool, *offering, InstanceState.PENDING, now, tags, self.image, tuple(refused), request.reservation
        )
        self._records[instance_id] = self._live[instance_id] = _Record(instance)
        self._listed[instance_id] = self._relisted[instance_id] = instance
        heapq.heappush(self._due, (now + self.boot_delay, instance_id))
        self._by_token[request.token] = instance_id
        self.events.append(CloudEvent(now, "launched", instance_id, request.node_name))
        if self.on_boot is not None:
            self.on_boot(request, instance)
        return instance

    def current_image(self, instance_type: str) -> str | None:
        """The image a boot would use now."""
        return self.image

    def terminate(self, instance_ids: Sequence[str]) -> None:
        self._check_throttle("TerminateInstances")
        now = self.clock.now()
        for instance_id in instance_ids:
            record = self._records.get(instance_id)
            if record is not None and record.terminated_at is None:
                self._end(record, now, "terminated")

    def list_instances(self) -> list[Instance]:
        self._check_throttle("DescribeInstances")
        self._inject_failures()
        now, due, listed = self.clock.now(), self._due, self._listed
        while due and due[0][0] <= now:
            _, instance_id = heapq.heappop(due)
            if instance_id in listed:
                listed[instance_id] = self._relisted[instance_id] = self._view(self._live[instance_id])
        listing = Listing(listed.values())
        if self._listing is not None:
            listing.since = Since(self._listing, listing, self._relisted)
            self._listing.since = None  # (only the newest says: each would keep every listing before it)
        self._listing, self._relisted = listing, {}
        return listing

    def describe(self, instance_id: str) -> Instance:
        self._inject_failures()
        record = self._records.get(instance_id)
        if record is None or (record.terminated_at is not None and self.clock.now() - record.terminated_at > TERMINATED_VISIBLE_FOR):
            raise NotFound(instance_id)
        return self._view(record)

    def fetch_prices(self) -> PriceUpdate | None:
        return None  # simulated prices are the catalog's

    def reservations(self, queries: Sequence[ReservationQuery], now: float) -> list[Reservation]:
        self._check_throttle("DescribeCapacityReservations")
        active = [r for r, start in self._reservations.values() if self._active(r, start, now) and any(q.selects(r) for q in queries)]
        return [replace(r, available=max(0, r.total - self._in_reservation(r.id)), seen_at=now) for r in active]

    def _active(self, reservation: Reservation, start: float, now: float) -> bool:
        return start <= now and (reservation.ends_at is None or now < reservation.ends_at)

    def _in_reservation(self, reservation: str) -> int:
        return sum(1 for r in self._live.values() if r.instance.reservation == reservation)

    def _check_reservation(self, request: BootRequest) -> None:
        """A launch into a reservation: it must be active, of the type and zone asked, and
        have an instance left (EC2's ``ReservationCapacityExceeded`` otherwise)."""
        found = self._reservations.get(request.reservation)
        now = self.clock.now()
        if found is None or not self._active(*found, now) or (found[0].instance_type, found[0].zone) != (request.instance_type, request.zone):
            self.errors.failed("RunInstances", "InvalidCapacityReservationId.NotFound")
            raise InsufficientCapacity(request.instance_type, request.capacity_type, request.zone, f"capacity reservation {request.reservation} is not active")
        if self._in_reservation(request.reservation) >= found[0].total:
            self.errors.failed("RunInstances", "ReservationCapacityExceeded")
            raise InsufficientCapacity(request.instance_type, request.capacity_type, request.zone, f"capacity reservation {request.reservation} is full")

    # -- inspection (simulation reports, tests) -------------------------------------------
    def all_instances(self) -> list[tuple[Instance, float | None]]:
        """Every instance ever launched, with its termination time (None: still alive)."""
        return [(self._view(r), r.terminated_at) for r in self._records.values()]

    def billed(self) -> list[tuple[Instance, float]]:
        """Every instance ever launched, with the seconds EC2 bills for it until now (``spans``)."""
        return [(span.instance, span.seconds) for span in self.spans()]

    def spans(self) -> list[BilledSpan]:
        """Every instance ever launched, with when it ran and what EC2 bills for it until
        now: each second from when it is ``running`` until it is terminated
        (``shutting-down``), at least a minute once it ran; nothing while it is ``pending``
        (the EC2 user guide's "Instance lifecycle"); nothing for a spot instance EC2
        interrupted in its first hour ("Billing for interrupted Spot Instances")."""
        now = self.clock.now()
        out = []
        for r in self._records.values():
            running = r.instance.launched_at + self.boot_delay
            until = now if r.terminated_at is None else r.terminated_at
            ran = until - running
            free = ran < 0 or (r.reason == "spot-interrupted" and ran < FREE_IF_RECLAIMED_WITHIN)
            out.append(BilledSpan(self._view(r), running, max(until, running), 0.0 if free else max(ran, MINIMUM_BILLED)))
        return out

    def running(self) -> list[Instance]:
        """The instances billed now: live and past their boot delay."""
        return [i for r in self._live.values() if (i := self._view(r)).state is InstanceState.RUNNING]

    def live_ids(self) -> set[str]:
        """The instances not terminated, looked at without a call (none counted, no failure drawn)."""
        return set(self._live)

    # -- internals --------------------------------------------------------------------------
    def live_count(self) -> int:
        return len(self._live)

    def _view(self, record: _Record) -> Instance:
        """The instance as of now; states only move forward, so a copy is made per change."""
        if record.terminated_at is not None:
            state = InstanceState.TERMINATED
        elif self.clock.now() >= record.instance.launched_at + self.boot_delay:
            state = InstanceState.RUNNING
        else:
            state = InstanceState.PENDING
        if record.instance.state is not state:
            record.instance = replace(record.instance, state=state)
        return record.instance

    def _end(self, record: _Record, now: float, kind: str) -> None:
        record.terminated_at = now
        self._live.pop(record.instance.instance_id, None)
        if self._listed.pop(record.instance.instance_id, None) is not None:
            self._relisted[record.instance.instance_id] = None
        record.reason = kind
        self.events.append(CloudEvent(now, kind, record.instance.instance_id, record.instance.node_name))

    def _check_throttle(self, call: str) -> None:
        if self.throttle_rate and self._rng.random() < self.throttle_rate:
            self.errors.failed(call, "RequestLimitExceeded", throttled=True)
            raise Throttled(f"{call}: Request limit exceeded (simulated)")

    def _capacity_limit(self, instance_type: str, capacity_type: CapacityType, zone: str) -> int | None:
        key = f"{instance_type}/{capacity_type.value}/{zone}"
        return next((limit for pattern, limit in self.capacity.items() if fnmatch.fnmatchcase(key, pattern)), None)

    def _live_count(self, instance_type: str, capacity_type: CapacityType, zone: str) -> int:
        wanted = (instance_type, capacity_type, zone)
        return sum(1 for r in self._live.values() if (r.instance.instance_type, r.instance.capacity_type, r.instance.zone) == wanted)

    def _inject_failures(self) -> None:
        """Deaths and spot interruptions since the last look, as Poisson arrivals. A spot
        interruption is warned of first (a message on ``interruptions``, as EventBridge
        sends it) and the instance goes two minutes later."""
        now = self.clock.now()
        self._reclaim_blocks(now)
        for instance_id, when in sorted(self._reclaim.items()):
            if when <= now:
                del self._reclaim[instance_id]
                if (record := self._live.get(instance_id)) is not None:
                    self._end(record, when, "spot-interrupted")
        last, self._checked_at = self._checked_at, now
        if last is None or now <= last or not (self.death_per_hour or self.spot_interruption_per_hour):
            return
        hours = (now - last) / 3600.0
        for record in list(self._live.values()):
            if self._view(record).state is not InstanceState.RUNNING or record.instance.instance_id in self._reclaim:
                continue
            rates = [("died", self.death_per_hour)]
            if record.instance.capacity_type is CapacityType.SPOT:
                rates.append(("spot-warning", self.spot_interruption_per_hour))
            for kind, rate in rates:
                if rate and self._rng.random() < 1 - math.exp(-rate * hours):
                    if kind == "spot-warning":
                        self.warn(record.instance.instance_id)
                    else:
                        self._end(record, now, kind)
                    break

    def _reclaim_blocks(self, now: float) -> None:
        """Instances of a Capacity Block still running when EC2 starts reclaiming it (30
        minutes before its end) are terminated then, as EC2 does."""
        if not self._reservations:
            return
        for record in list(self._live.values()):
            found = self._reservations.get(record.instance.reservation)
            when = found[0].reclaimed_at() if found is not None else None
            if when is not None and when <= now:
                self._end(record, when, "capacity-block-reclaimed")

    def warn(self, instance_id: str) -> None:
        """Send the spot interruption warning for ``instance_id``: it goes two minutes later."""
        record = self._live.get(instance_id)
        if record is None or instance_id in self._reclaim:
            return
        now = self.clock.now()
        self._reclaim[instance_id] = now + SPOT_NOTICE
        self.events.append(CloudEvent(now, "spot-warning", instance_id, record.instance.node_name))
        body = event_body(f"sim-{instance_id}-{now:.0f}", InterruptionKind.SPOT_INTERRUPTION, instance_id, zone=record.instance.zone)
        self.interruptions.send(body)
