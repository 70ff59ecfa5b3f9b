"""What every block of provider.yaml is made of: ``Model`` (camelCase keys, unknown keys refused),
label checks, quantities, the limits shared by several blocks."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer
from pydantic.alias_generators import to_camel

from nodemanager.errors import InvalidQuantity
from nodemanager.model import format_quantity, resource_amount


def _amount_of(resource: str) -> BeforeValidator:
    def parse(value: object) -> int:
        try:
            return resource_amount(resource, value, resource)
        except InvalidQuantity as exc:
            raise ValueError(f"expected {exc.expected}, got {value!r}") from None

    return BeforeValidator(parse)


#: Milli-cores, written as ``4``, ``500m`` or ``1.5``.
CpuQuantity = Annotated[int, _amount_of("cpu"), PlainSerializer(lambda v: format_quantity("cpu", v), return_type=str)]
#: Bytes, written as ``20Gi``, ``512Mi`` or ``1G``.
ByteQuantity = Annotated[int, _amount_of("memory"), PlainSerializer(lambda v: format_quantity("memory", v), return_type=str)]

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_COUNT = 10_000  # standby nodes per entry: more is a typo, and each is work per loop
MAX_STANDBY = 10_000  # standby nodes across every entry of every pool
MAX_POOLS = 100
MAX_PATTERNS = 500  # instance type names or globs per list
MIN_INTERVAL = 0.1  # seconds: a loop run more often only burns a core
MIN_BOOT_TIMEOUT = 30.0  # seconds: no instance boots and registers faster
MAX_TAGS = 50  # EC2's limit on tags per instance, nodemanager's own included
OWN_TAGS = 6  # the tags nodemanager adds (Name, controller, node, pool, taints, startup taints)
# Kubernetes' qualified names (label and taint keys) and label values.
_LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_QUALIFIED = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^{_LABEL_NAME}?$")


def check_label(key: str, value: str) -> None:
    """Kubernetes' rules for a label (and a taint): a qualified key, a value of at most 63
    characters of letters, digits, ``-``, ``_`` and ``.``. Values that pass them need no
    quoting where a user-data template pastes them into a shell command."""
    if not _QUALIFIED.match(key):
        raise ValueError(f"{key!r} is not a valid label key (an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, '-', '_', '.')")
    if not _LABEL_VALUE.match(value):
        raise ValueError(f"{key}: {value!r} is not a valid label value (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)")


MAX_BOOTS = 100_000  # boots one decision may start


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, use_enum_values=False, use_attribute_docstrings=True
    )


def only_chosen_block(model: BaseModel, selector: str, blocks: dict[StrEnum, type[BaseModel] | None]) -> None:
    """The block named by ``model.<selector>`` may be given (or is defaulted); the others
    may not. A block without a default (``None``) must be given."""
    chosen = getattr(model, selector)
    for kind in blocks:
        if kind is not chosen and getattr(model, kind.value) is not None:
            raise ValueError(f"has a {kind.value!r} block but {selector} is {chosen.value!r}")
    if getattr(model, chosen.value) is None:
        default = blocks[chosen]
        if default is None:
            raise ValueError(f"{selector} is {chosen.value!r} but there is no {chosen.value!r} block")
        object.__setattr__(model, chosen.value, default())
