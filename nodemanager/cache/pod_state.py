"""The cache's pod lifecycle as data (godel-scheduler's cache state machine).

Initial, Expired and Deleted pods are not stored: only Assumed and Added ones are.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from nodemanager.errors import NodeManagerError


class PodState(StrEnum):
    INITIAL = "Initial"
    ASSUMED = "Assumed"  # placed by us, the bind not yet seen in the cluster
    ADDED = "Added"  # bound, as the cluster reports it
    EXPIRED = "Expired"  # assumed, but the bind was never confirmed in time
    DELETED = "Deleted"


class PodOp(StrEnum):
    ASSUME = "assume"
    ADD = "add"
    UPDATE = "update"
    FORGET = "forget"
    EXPIRE = "expire"
    REMOVE = "remove"


S, Op = PodState, PodOp
POD_TRANSITIONS: Mapping[tuple[PodState, PodOp], tuple[PodState, str]] = MappingProxyType(
    {
        (S.INITIAL, Op.ASSUME): (S.ASSUMED, "the scaler placed the pod and a bind is on its way"),
        (S.INITIAL, Op.ADD): (S.ADDED, "a pod bound by someone else (or before a restart) is seen"),
        (S.ASSUMED, Op.ADD): (S.ADDED, "the cluster confirmed our bind"),
        (S.ASSUMED, Op.FORGET): (S.INITIAL, "the bind failed: the pod waits again"),
        (S.ASSUMED, Op.EXPIRE): (S.EXPIRED, "the bind was never confirmed within the assume TTL"),
        (S.ASSUMED, Op.REMOVE): (S.DELETED, "the pod was deleted before its bind was confirmed"),
        (S.EXPIRED, Op.ADD): (S.ADDED, "the confirmation arrived after all"),
        (S.EXPIRED, Op.ASSUME): (S.ASSUMED, "placed again after expiring"),
        (S.ADDED, Op.UPDATE): (S.ADDED, "the bound pod changed"),
        (S.ADDED, Op.REMOVE): (S.DELETED, "the pod finished, was deleted, or lost its node"),
        (S.DELETED, Op.ADD): (S.ADDED, "a pod of the same name was created and bound again"),
        (S.DELETED, Op.ASSUME): (S.ASSUMED, "a pod of the same name is placed again"),
    }
)


class IllegalPodTransition(NodeManagerError):
    def __init__(self, pod: str, state: PodState, op: PodOp) -> None:
        self.pod, self.state, self.op = pod, state, op
        super().__init__(f"pod {pod}: cannot {op} a pod that is {state}")


def next_state(pod: str, state: PodState, op: PodOp) -> PodState:
    try:
        return POD_TRANSITIONS[(state, op)][0]
    except KeyError:
        raise IllegalPodTransition(pod, state, op) from None
