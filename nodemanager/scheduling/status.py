"""``Status`` and ``Code``: what every extension point returns (scheduling framework v1alpha1)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1  # internal error: aborts the attempt
    UNSCHEDULABLE = 2  # this node will not do; preemption might help
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3  # this node will never do
    WAIT = 4  # Permit only
    SKIP = 5  # Bind: "not mine, ask the next plugin"; PreFilter: "my Filter has nothing to check for this pod"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    message: str = ""
    plugin: str = ""

    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    def is_unschedulable(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def as_error(self) -> Exception | None:
        return None if self.is_success() else RuntimeError(self.message)

    def __str__(self) -> str:
        origin = f" ({self.plugin})" if self.plugin else ""
        return f"{self.code.name}{origin}: {self.message}" if self.message else f"{self.code.name}{origin}"


SUCCESS = Status()
SKIP = Status(Code.SKIP)  # (statuses are immutable: the plain ones are made once)


def is_success(status: Status | None) -> bool:
    """None counts as Success, as in the framework."""
    return status is None or status.code is Code.SUCCESS


def unschedulable(message: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, message, plugin)


def unresolvable(message: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message, plugin)


def error(message: str, plugin: str = "") -> Status:
    return Status(Code.ERROR, message, plugin)
