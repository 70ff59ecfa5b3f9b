"""The one place that reads EC2 error codes: botocore errors become the project's types."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, EndpointConnectionError

from cloud.errors import CloudError, InsufficientCapacity, NotFound, QuotaExceeded, Throttled, Unsupported
from nodemanager.model import CapacityType

CAPACITY = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "UnfulfillableCapacity",
        "ReservationCapacityExceeded",
    }
)
ADDRESSES = frozenset({"InsufficientFreeAddressesInSubnet", "InsufficientAddressCapacity"})
QUOTA = frozenset({"InstanceLimitExceeded", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "SpotMaxPriceTooLow"})
THROTTLING = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException"})
NOT_FOUND = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
# A subnet, image, security group or launch template the cloud no longer knows: what was
# looked up and cached is stale (the endpoint was reset, someone deleted it).
STALE_VIEW = frozenset(
    {
        "InvalidSubnetID.NotFound",
        "InvalidSubnet",
        "InvalidAMIID.NotFound",
        "InvalidAMIID.Unavailable",
        "InvalidGroup.NotFound",
        "InvalidSecurityGroupID.NotFound",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
    }
)


class SubnetExhausted(CloudError):
    """A subnet has no free addresses; the provider tries the zone's other subnets first."""

    def __init__(self, subnet: str, zone: str, detail: str) -> None:
        self.subnet = subnet
        self.zone = zone
        super().__init__(f"subnet {subnet} in {zone} has no free addresses: {detail}")


def code_of(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


# Codes that name what failed: retrying the same call cannot help, whatever the HTTP status
# (EC2 sends the Insufficient*Capacity codes with status 500).
DEFINITE = CAPACITY | ADDRESSES | QUOTA | NOT_FOUND | STALE_VIEW | {"Unsupported", "UnsupportedOperation"}


def is_retryable(exc: BaseException) -> bool:
    """Throttling, 5xx and dropped connections: safe to retry. Nothing else is, and the
    error code is read before the status."""
    if isinstance(exc, ClientError):
        code = code_of(exc)
        if code in DEFINITE:
            return False
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in THROTTLING or status >= 500 or code in ("InternalError", "ServiceUnavailable", "Unavailable")
    return isinstance(exc, EndpointConnectionError | ConnectionError)


def translate(
    exc: BaseException, *, instance_type: str = "", capacity_type: CapacityType = CapacityType.ON_DEMAND, zone: str = "", subnet: str = ""
) -> CloudError:
    """The project's error for a botocore failure of a call about this offering."""
    code = code_of(exc)
    message = exc.response.get("Error", {}).get("Message", str(exc)) if isinstance(exc, ClientError) else str(exc)
    known = from_code(code, message, instance_type=instance_type, capacity_type=capacity_type, zone=zone, subnet=subnet)
    if known is not None:
        return known
    if is_retryable(exc):
        return Throttled(f"{code or 'cloud endpoint unreachable'}: {message} (retries exhausted)")
    if isinstance(exc, BotoCoreError | ClientError):
        return CloudError(f"{code or type(exc).__name__}: {message}")
    return CloudError(str(exc))


def from_code(
    code: str, message: str, *, instance_type: str = "", capacity_type: CapacityType = CapacityType.ON_DEMAND, zone: str = "", subnet: str = ""
) -> CloudError | None:
    """The project's error for an EC2 error code that names what failed (also a fleet's
    per-offering errors, which come as codes in its answer); None for any other code."""
    if code in CAPACITY:
        return InsufficientCapacity(instance_type, capacity_type, zone, f"{code}: {message}")
    if code in ADDRESSES:
        return SubnetExhausted(subnet, zone, f"{code}: {message}")
    if code in QUOTA:
        return QuotaExceeded(f"{code}: {message}")
    if code in {"Unsupported", "UnsupportedOperation"}:
        return Unsupported(instance_type, capacity_type, zone, f"{code}: {message}")
    if code in NOT_FOUND:
        return NotFound(message)
    return None
