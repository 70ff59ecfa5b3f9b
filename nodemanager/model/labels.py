"""Well-known node labels. Real and not-yet-booted nodes carry the same set, so every
selector and affinity plugin treats them alike."""

from __future__ import annotations

from collections.abc import Mapping

from nodemanager.model.reservation import ReservationKind

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "nodemanager.io/capacity-type"
POOL = "nodemanager.io/pool"
RESERVATION_ID = "nodemanager.io/capacity-reservation-id"  # reserved nodes only
RESERVATION_TYPE = "nodemanager.io/capacity-reservation-type"  # default or capacity-block (EC2's reservationType)

#: EC2 architecture names as Kubernetes spells them.
KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64", "i386": "386"}


def well_known(
    *,
    name: str,
    pool: str,
    instance_type: str,
    zone: str,
    capacity_type: str,
    architectures: tuple[str, ...],
    reservation: str = "",
    capacity_block: bool = False,
) -> dict[str, str]:
    region = zone[:-1] if zone and zone[-1].isalpha() else zone
    arch = next((KUBE_ARCH[a] for a in architectures if a in KUBE_ARCH), "amd64")
    labels = {INSTANCE_TYPE: instance_type, ZONE: zone, REGION: region, ARCH: arch, OS: "linux", CAPACITY_TYPE: capacity_type, POOL: pool}
    if name:
        labels[HOSTNAME] = name
    if reservation:
        labels[RESERVATION_ID] = reservation
        labels[RESERVATION_TYPE] = (ReservationKind.CAPACITY_BLOCK if capacity_block else ReservationKind.DEFAULT).value
    return labels


def merged(user: Mapping[str, str], known: Mapping[str, str]) -> dict[str, str]:
    """The pool's own labels, with the well-known ones winning (they describe facts)."""
    return {**user, **known}
