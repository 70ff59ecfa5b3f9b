"""A node launched through EC2 Fleet: one ``CreateFleet`` call of type ``instant`` offering
every (instance type, zone) the scaler found as good for the node, of one capacity type,
as Karpenter launches. EC2 takes the first it can by the allocation strategy and answers
with the instance and with an error for each offering it tried and could not launch.

A fleet launches from launch templates, so nodemanager makes its own: one per distinct
content (the image, volumes, metadata options, security groups, profile and user data;
the image, type and subnet come in each override), named by a hash of that content, so
nodes that need the same template share it and a change makes a new one. The user data of
a shared template cannot name one node, type or zone: its kubelet registers with the
pool's labels, and nodemanager adds the node's own (type, zone) once the Node exists.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from cloud.aws.errors import code_of, from_code
from cloud.base import CONTROLLER_TAG, BootRequest
from cloud.errors import CloudError, OfferingError, ZoneUnavailable
from nodemanager.model import CapacityType
from nodemanager.model.labels import HOSTNAME, INSTANCE_TYPE, ZONE

log = logging.getLogger("nodemanager.cloud.aws")

TEMPLATE_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"
# Labels that differ between a fleet's offerings or its nodes: not in a shared template's user data.
PER_OFFERING_LABELS = (HOSTNAME, INSTANCE_TYPE, ZONE)
# What RunInstances takes that a launch template does not (or that each override gives).
_NOT_IN_TEMPLATE = ("MinCount", "MaxCount", "InstanceType", "ClientToken", "TagSpecifications", "InstanceMarketOptions", "ImageId", "SubnetId")


def shared_request(request: BootRequest, instance_type: str) -> BootRequest:
    """``request`` as a template shared by many nodes sees it: no node name, zone or labels
    of one offering; ``instance_type`` sets what depends on the type (the kubelet's pod limit)."""
    labels = {k: v for k, v in request.labels.items() if k not in PER_OFFERING_LABELS}
    return BootRequest(
        node_name="",
        pool=request.pool,
        instance_type=instance_type,
        capacity_type=request.capacity_type,
        zone="",
        token="",
        volume_bytes=request.volume_bytes,
        labels=labels,
        taints=request.taints,
        startup_taints=request.startup_taints,
    )


def template_data(run_params: Mapping[str, Any]) -> dict[str, Any]:
    """A launch template's data from the parameters RunInstances would take (user data
    base64-encoded, as launch templates hold it)."""
    data = {k: v for k, v in run_params.items() if k not in _NOT_IN_TEMPLATE}
    if "UserData" in data:
        data["UserData"] = base64.b64encode(data["UserData"].encode()).decode()
    return data


class LaunchTemplates:
    """The launch templates this controller made, by name (a hash of their content): each
    is created once (an existing one of that name has that content) and kept."""

    def __init__(self, controller_id: str, call: Callable[..., Any]) -> None:
        self.controller_id = controller_id
        self._call = call  # AwsCloud._call: one EC2 call under its retry policy
        self._known: set[str] = set()

    def name_for(self, data: Mapping[str, Any]) -> str:
        digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:24]
        name = f"nodemanager-{self.controller_id}-{digest}"
        if name in self._known:
            return name
        tags = [{"Key": CONTROLLER_TAG, "Value": self.controller_id}]
        spec = {"LaunchTemplateName": name, "LaunchTemplateData": dict(data), "TagSpecifications": [{"ResourceType": "launch-template", "Tags": tags}]}
        try:
            self._call("create_launch_template", **spec)
            log.info("launch template %s created", name)
        except ClientError as exc:
            if code_of(exc) != TEMPLATE_EXISTS:
                raise
        self._known.add(name)
        return name

    def forget(self) -> None:
        """Look every template up again (one was deleted behind our back)."""
        self._known.clear()


def fleet_params(request: BootRequest, configs: Sequence[tuple[str, list[dict[str, Any]]]], tags: list[dict[str, str]]) -> dict[str, Any]:
    """CreateFleet's parameters: one config per launch template with its overrides, in the
    order the offerings were given (the planned one first), which ``prioritized`` follows."""
    spot = request.capacity_type is CapacityType.SPOT
    params: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": request.token,
        "LaunchTemplateConfigs": [
            {"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"}, "Overrides": overrides} for name, overrides in configs
        ],
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot" if spot else "on-demand"},
        "TagSpecifications": [{"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume", "fleet")],
    }
    if spot:
        params["SpotOptions"] = {"AllocationStrategy": request.spot_strategy}
    else:
        params["OnDemandOptions"] = {"AllocationStrategy": request.on_demand_strategy}
    return params


def refusals(reply: Mapping[str, Any], capacity_type: CapacityType, zone_of: Mapping[str, str]) -> list[CloudError]:
    """The fleet's error for each offering it could not launch, as the project's errors
    (a subnet out of addresses as ``SubnetExhausted``: the caller knows its other subnets)."""
    found: list[CloudError] = []
    for error in reply.get("Errors", []):
        override = (error.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        subnet = override.get("SubnetId", "")
        zone = override.get("AvailabilityZone") or zone_of.get(subnet, "")
        code, message = error.get("ErrorCode", ""), error.get("ErrorMessage", "")
        what = {"instance_type": override.get("InstanceType", ""), "capacity_type": capacity_type, "zone": zone}
        known = from_code(code, message, subnet=subnet, **what)
        found.append(known if known is not None else CloudError(f"{what['instance_type']}/{capacity_type}/{zone}: {code}: {message}"))
    return found


def markable(errors: Sequence[CloudError]) -> tuple[OfferingError | ZoneUnavailable, ...]:
    """Those of a fleet's errors that say which offering or zone is out (what the unavailable-
    offering cache takes, once the fleet launched another); the others are logged."""
    for error in errors:
        if not isinstance(error, OfferingError | ZoneUnavailable):
            log.warning("fleet launch: %s", error)
    return tuple(e for e in errors if isinstance(e, OfferingError | ZoneUnavailable))
