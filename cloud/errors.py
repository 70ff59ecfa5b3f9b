"""What a cloud refused, as types the controller acts on (never matched on text).

CloudError                       (a NodeManagerError)
├── InsufficientCapacity         this offering (type, capacity type, zone) is out: try another
├── Unsupported                  the offering does not exist there: never retry it there
├── QuotaExceeded                an account limit: nothing of this kind boots until it is raised
├── LaunchRefused                a fleet launch could launch none of its offerings: each one's error
├── Throttled                    the API asked us to slow down or did not answer; retries were exhausted
│   └── DeadlinePassed           the loop pass ran out of time before this call: made again next pass
└── NotFound                     the instance is not (or no longer) there
"""

from __future__ import annotations

from nodemanager.errors import NodeManagerError
from nodemanager.model import CapacityType


class CloudError(NodeManagerError):
    """A cloud call failed for a reason the controller understands."""


class OfferingError(CloudError):
    """A failure that concerns one offering: (instance type, capacity type, zone)."""

    problem = "cannot be launched"

    def __init__(self, instance_type: str, capacity_type: CapacityType, zone: str, detail: str = "") -> None:
        self.instance_type = instance_type
        self.capacity_type = capacity_type
        self.zone = zone
        super().__init__(f"{instance_type}/{capacity_type}/{zone}: {self.problem}{': ' + detail if detail else ''}")


class InsufficientCapacity(OfferingError):
    problem = "insufficient capacity"


class Unsupported(OfferingError):
    problem = "not supported there"


class ZoneUnavailable(CloudError):
    """Nothing can start in this zone for now (e.g. every subnet there is out of addresses)."""

    def __init__(self, zone: str, detail: str = "") -> None:
        self.zone = zone
        super().__init__(f"zone {zone} is unavailable{': ' + detail if detail else ''}")


class QuotaExceeded(CloudError):
    pass


class LaunchRefused(CloudError):
    """A fleet launch launched nothing: why each offering (or subnet, or quota) refused."""

    def __init__(self, refusals: list[CloudError]) -> None:
        self.refusals = tuple(refusals)
        shown = "; ".join(str(r) for r in refusals[:3]) + (f"; and {len(refusals) - 3} more" if len(refusals) > 3 else "")
        super().__init__(f"no offering of the fleet launch could be launched: {shown or 'no reason given'}")


class Throttled(CloudError):
    pass


class DeadlinePassed(Throttled):
    def __init__(self, operation: str) -> None:
        super().__init__(f"{operation} not called: the loop pass ran past its deadline (tried again next pass)")


class NotFound(CloudError):
    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(f"instance {instance_id} not found")
