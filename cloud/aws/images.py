"""``Images``: the machine image each architecture boots, resolved from
``nodes.bootImageSpec`` (explicit ids, or the newest image matching owners and filters) and
looked up again after a few minutes, so a new image shows as drift; none with a launch
template, which names its own."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from cloud.aws.settings import BootImage
from cloud.aws.subnets import CACHE_SECONDS
from cloud.catalog import Catalog
from cloud.errors import CloudError, Unsupported
from nodemanager.model import CapacityType

log = logging.getLogger("nodemanager.cloud.aws")

_EC2_ARCH = {"x86_64": "x86_64", "arm64": "arm64", "i386": "i386"}


class Images:
    def __init__(self, spec: BootImage, catalog: Catalog, now: Callable[[], float], checked: Callable[..., Any]) -> None:
        self.spec = spec
        self.catalog = catalog
        self.now = now
        self._checked = checked  # AwsCloud._checked: one EC2 call, its error translated
        self._found: dict[str, tuple[float, dict[str, Any]]] = {}  # architecture -> (when, DescribeImages' record)

    def current(self, instance_type: str) -> str | None:
        """The image ``instance_type`` would boot now, as last resolved (no call is made)."""
        if self.spec.launch_template:
            return None
        cached = self._found.get(self.arch(instance_type))
        return cached[1]["ImageId"] if cached is not None else None

    def refresh(self, instance_types: Iterable[str]) -> None:
        """Resolve the spec again for these types' architectures, where the last answer is
        older than the cache allows; the first failure is raised once all were tried."""
        if self.spec.launch_template or not (self.spec.image_ids or self.spec.owners or self.spec.filters):
            return
        failed: list[CloudError] = []
        for instance_type in sorted({self.arch(t): t for t in instance_types}.values()):
            try:
                self.resolve(instance_type)
            except CloudError as exc:  # the other architectures are still resolved
                failed.append(exc)
        if failed:
            raise failed[0]

    def forget(self) -> None:
        """Look every image up again (one the cloud no longer knows was named)."""
        self._found.clear()

    def arch(self, instance_type: str) -> str:
        itype = self.catalog.get(instance_type)
        return next((_EC2_ARCH[a] for a in (itype.architectures if itype else ("x86_64",)) if a in _EC2_ARCH), "x86_64")

    def resolve(self, instance_type: str, capacity_type: CapacityType = CapacityType.ON_DEMAND, zone: str = "") -> dict[str, Any]:
        """DescribeImages' record of the image ``instance_type`` boots (cached a while)."""
        arch = self.arch(instance_type)
        cached = self._found.get(arch)
        if cached is not None and self.now() - cached[0] < CACHE_SECONDS:
            return cached[1]
        spec = self.spec
        if spec.image_ids:
            images = self._checked("describe_images", ImageIds=list(spec.image_ids)).get("Images", [])
        elif spec.owners or spec.filters:
            filters = [{"Name": k, "Values": list(v)} for k, v in sorted(spec.filters.items())] + [{"Name": "architecture", "Values": [arch]}]
            params: dict[str, Any] = {"Filters": filters}
            if spec.owners:
                params["Owners"] = list(spec.owners)
            images = self._checked("describe_images", **params).get("Images", [])
        else:
            raise CloudError("nodes.bootImageSpec is empty: give imageIDs, owners/filters or a launchTemplate for cloud.provider aws")
        matching = [i for i in images if i.get("Architecture", arch) == arch]
        if not matching:
            if cached is not None:
                log.warning("no %s image matches nodes.bootImageSpec now; keeping %s", arch, cached[1]["ImageId"])
                return cached[1]
            raise Unsupported(instance_type, capacity_type, zone, f"no {arch} image matches nodes.bootImageSpec")
        newest = max(matching, key=lambda i: (i.get("CreationDate", ""), i["ImageId"]))
        self._found[arch] = (self.now(), newest)
        return newest
