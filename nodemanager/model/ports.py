"""Host ports: what kube-scheduler's NodePorts plugin checks (``framework.HostPortInfo``).

A container port with ``hostPort > 0`` claims (host IP, protocol, port) on its node. An
empty host IP means ``0.0.0.0`` (every address) and an empty protocol ``TCP``. Two claims
conflict on the same protocol and port when either is on ``0.0.0.0`` or both name the same
address.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ANY_IP = "0.0.0.0"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ANY_IP

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return ANY_IP in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip

    def __str__(self) -> str:
        return f"{self.host_ip}:{self.port}/{self.protocol}"


def port_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> HostPort | None:
    """The first wanted port that an used one conflicts with, if any."""
    taken = list(used)
    return next((p for p in wanted if any(p.conflicts(u) for u in taken)), None)
