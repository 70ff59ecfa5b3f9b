"""``AwsCloud``: the CloudClient for EC2, through boto3.

* Boot: one CreateFleet (``fleet``) per node with alternatives, else one RunInstances,
  with a ClientToken derived from the node (EC2 returns the same instance for a repeated
  token); before launching, an instance already tagged with the node's name is returned
  instead, which also covers endpoints that ignore tokens. The subnet is one of the
  zone's, skipping subnets that recently ran out of addresses; when every subnet of a zone
  is out, the whole zone is reported so the scaler moves on to another.
* Find / describe / terminate: DescribeInstances filtered by the controller tag
  (paginated), TerminateInstances in batches.
* Errors: throttling, 5xx and dropped connections are retried by tenacity (exponential
  backoff with jitter, bounded in attempts and time), then reported as Throttled; every
  other failure is translated once (``errors.translate``) and never retried blindly. A
  throttling answer pauses every caller at once (``pacing.SharedPause``).
Credentials come only from the standard AWS chain; nothing here reads or logs them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, stop_when_event_set, wait_exponential_jitter

from cloud.aws import reservations
from cloud.aws.errors import NOT_FOUND, STALE_VIEW, THROTTLING, SubnetExhausted, code_of, is_retryable, translate
from cloud.aws.fleet import LaunchTemplates, fleet_params, markable, refusals, shared_request, template_data
from cloud.aws.images import Images
from cloud.aws.pacing import SharedPause
from cloud.aws.pricing import PRICING_REGION, REGION_NAMES, on_demand_prices, spot_prices
from cloud.aws.queue import SqsQueue
from cloud.aws.settings import AwsSettings, BootImage, ImageFamily, family_of
from cloud.aws.subnets import Subnets
from cloud.aws.userdata import NodeJoin
from cloud.base import CONTROLLER_TAG, NODE_TAG, POOL_TAG, RESERVATION_TAG, BootRequest, Instance, InstanceState, PriceUpdate, launch_tags
from cloud.catalog import Catalog
from cloud.errors import CloudError, DeadlinePassed, LaunchRefused, NotFound, Unsupported, ZoneUnavailable
from nodemanager.clock import Clock
from nodemanager.deadline import remaining
from nodemanager.model import CapacityType
from nodemanager.model.reservation import Reservation, ReservationQuery
from nodemanager.tally import ErrorTally

log = logging.getLogger("nodemanager.cloud.aws")

SPOT_HISTORY_SECONDS = 6 * 3600.0  # spot prices newer than this count
MIN_SPOT_FRACTION = 0.01  # a spot price under 1% of on-demand is taken for a placeholder
TERMINATE_BATCH = 500


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    max_seconds: float = 30.0
    initial: float = 0.5
    cap: float = 8.0


class AwsCloud:
    def __init__(
        self,
        settings: AwsSettings,
        controller_id: str,
        catalog: Catalog,
        clock: Clock,
        *,
        boot_image: BootImage | None = None,
        session: boto3.session.Session | None = None,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.settings = settings
        self.catalog = catalog
        self.clock = clock
        self.boot_image = boot_image or BootImage()
        self.retry = retry
        # Setting ``stop`` (the service does on SIGTERM) ends retry waits at once.
        self.stop = stop or threading.Event()
        self.sleep = sleep or self.stop.wait
        self.pause = SharedPause(clock.now, self.sleep)
        self.errors = ErrorTally()  # failed calls by operation and code, for /metrics
        session = session or boto3.session.Session()
        # botocore's own retries are off: tenacity decides what is retried, and how often.
        config = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=20, user_agent_extra="nodemanager")
        self.ec2 = session.client("ec2", region_name=settings.region, endpoint_url=settings.endpoint_url, config=config)
        # An EC2-compatible endpoint answers for prices too (or fails, and bundled prices stay).
        self.pricing = session.client("pricing", region_name=PRICING_REGION, endpoint_url=settings.endpoint_url, config=config)
        # The EKS cluster nodes join, when provider.yaml names it without its every value.
        self.eks = session.client("eks", region_name=settings.region, endpoint_url=settings.endpoint_url, config=config) if settings.eks else None
        self.join = NodeJoin(settings, controller_id, catalog, self._describe_cluster)
        # The interruption queue, when provider.yaml names one (SQS at the same endpoint).
        self.interruptions = (
            SqsQueue(session.client("sqs", region_name=settings.region, endpoint_url=settings.endpoint_url, config=config), settings.interruption_queue)
            if settings.interruption_queue
            else None
        )
        self.templates = LaunchTemplates(controller_id, self._call)  # the launch templates of fleet launches
        self.images = Images(self.boot_image, catalog, clock.now, self._checked)
        self.subnets = Subnets(settings, clock.now, self._checked)

    # -- calls --------------------------------------------------------------------------------
    def _retrying(self, what: str) -> Retrying:
        """Retries only where retrying is safe (throttling, 5xx, dropped connections), and
        within the loop pass's deadline: no call once it has passed, no wait that ends past it."""

        def not_past_deadline(_: RetryCallState) -> None:
            left = remaining()
            if left is not None and left <= 0:
                raise DeadlinePassed(what)

        def past_deadline(state: RetryCallState) -> bool:
            left = remaining()
            return left is not None and left < state.upcoming_sleep

        return Retrying(
            retry=retry_if_exception(is_retryable),
            wait=wait_exponential_jitter(multiplier=self.retry.initial, max=self.retry.cap, jitter=self.retry.initial),
            stop=stop_after_attempt(self.retry.attempts) | stop_after_delay(self.retry.max_seconds) | stop_when_event_set(self.stop) | past_deadline,
            sleep=self.sleep,
            reraise=True,
            before=not_past_deadline,
            before_sleep=lambda state: log.debug("%s throttled or failed transiently (attempt %d), retrying", what, state.attempt_number),
        )

    def _paced(self, what: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` after any shared pause, telling the pause how the endpoint answered."""

        def paced(**params: Any) -> Any:
            self.pause.wait(what)
            sent = self.clock.now()
            try:
                reply = call(**params)
            except ClientError as exc:
                code = code_of(exc)
                self.errors.failed(what, code or "Unknown", throttled=code in THROTTLING)
                if code in THROTTLING:
                    self.pause.throttled(sent)
                raise
            except (BotoCoreError, OSError) as exc:
                self.errors.failed(what, type(exc).__name__)
                raise
            self.pause.succeeded()
            return reply

        return paced

    def _call(self, operation: str, **params: Any) -> Any:
        """One EC2 call under the retry policy; raises the raw botocore error."""
        return self._retrying(operation)(self._paced(operation, getattr(self.ec2, operation)), **params)

    def _checked(self, operation: str, **params: Any) -> Any:
        try:
            return self._call(operation, **params)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from None

    # -- CloudClient ---------------------------------------------------------------------------
    def boot(self, request: BootRequest) -> Instance:
        existing = self._find_node(request.node_name)
        if existing is not None:
            log.info("node %s already has instance %s: not launching again", request.node_name, existing.instance_id)
            return existing
        if request.alternatives and not self.boot_image.launch_template and not request.reservation:
            return self._fleet_boot(request)
        offering = {"instance_type": request.instance_type, "capacity_type": request.capacity_type, "zone": request.zone}
        params = self._run_params(request)
        if request.zone not in self.subnets.by_zone():
            raise Unsupported(request.instance_type, request.capacity_type, request.zone, f"no configured subnet is in {request.zone}")
        for subnet in self.subnets.usable(request.zone):
            try:
                reply = self._call("run_instances", **params, SubnetId=subnet)
            except (ClientError, BotoCoreError) as exc:
                error = translate(exc, subnet=subnet, **offering)
                if isinstance(error, SubnetExhausted):
                    log.warning("%s; trying the zone's other subnets", error)
                    self.subnets.ran_out(subnet)
                    continue
                if code_of(exc) in STALE_VIEW:
                    log.warning("%s: subnets and images will be looked up again", error)
                    self.subnets.forget()
                    self.images.forget()
                raise error from None
            return self._instance(reply["Instances"][0])
        raise ZoneUnavailable(request.zone, "every subnet there is out of addresses")

    def _fleet_boot(self, request: BootRequest, again: bool = False) -> Instance:
        """One CreateFleet (type instant) offering every offering of ``request`` (see
        ``fleet``); made once more, with everything looked up again, if a subnet, image or
        launch template it named is gone (``again``: this is that call)."""
        subnets = self.subnets.by_zone()
        now = self.clock.now()
        chosen = {zone: next(iter(self.subnets.usable(zone)), None) for zone in subnets}
        image = self.images.resolve(request.instance_type, request.capacity_type, request.zone)
        prioritized = request.capacity_type is CapacityType.ON_DEMAND and request.on_demand_strategy == "prioritized"
        configs: dict[str, list[dict[str, Any]]] = {}
        by_limit: dict[int | None, str] = {}  # the kubelet's pod limit -> template (all else is shared)
        for rank, (instance_type, zone) in enumerate(request.offerings()):
            subnet = chosen.get(zone)
            if subnet is None:
                continue
            itype = self.catalog.get(instance_type)
            limit = itype.max_pods if itype else None
            if limit not in by_limit:
                by_limit[limit] = self.templates.name_for(template_data(self._run_params(shared_request(request, instance_type))))
            override = {"InstanceType": instance_type, "SubnetId": subnet, "AvailabilityZone": zone, "ImageId": image["ImageId"]}
            configs.setdefault(by_limit[limit], []).append({**override, "Priority": float(rank)} if prioritized else override)
        if not configs:
            if request.zone not in subnets:
                raise Unsupported(request.instance_type, request.capacity_type, request.zone, f"no configured subnet is in {request.zone}")
            raise ZoneUnavailable(request.zone, "every subnet there recently ran out of addresses")
        tags = {**self.settings.tags, **launch_tags(request, self.controller_id)}
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        try:
            reply = self._call("create_fleet", **fleet_params(request, list(configs.items()), tag_list))
        except (ClientError, BotoCoreError) as exc:
            if code_of(exc) in STALE_VIEW and not again:
                log.warning("%s: subnets, images and launch templates are looked up again", translate(exc))
                self.subnets.forget()
                self.images.forget()
                self.templates.forget()
                return self._fleet_boot(request, again=True)
            raise translate(exc, instance_type=request.instance_type, capacity_type=request.capacity_type, zone=request.zone) from None
        zone_of = {subnet: zone for zone, ids in subnets.items() for subnet in ids}
        errors = []
        for error in refusals(reply, request.capacity_type, zone_of):
            if isinstance(error, SubnetExhausted):
                self.subnets.ran_out(error.subnet)
                if not self.subnets.usable(error.zone):
                    errors.append(ZoneUnavailable(error.zone, "every subnet there is out of addresses"))
                continue
            errors.append(error)
        launched = next((i for i in reply.get("Instances", []) if i.get("InstanceIds")), None)
        if launched is None and not errors and not again:
            return self._fleet_boot(request, again=True)  # only subnets ran out, and their zones have others
        if launched is None:
            raise LaunchRefused(errors or [CloudError("the fleet launched nothing and named no reason")])
        override = (launched.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        zone = override.get("AvailabilityZone") or zone_of.get(override.get("SubnetId", ""), "")
        instance_type = launched.get("InstanceType") or override.get("InstanceType", "")
        offering = (instance_type, request.capacity_type, zone)
        refused = markable(errors)
        if refused:
            log.warning("node %s: fleet launch fell back to %s/%s/%s after %d refusal(s): %s", request.node_name, *offering, len(refused), refused[0])
        return Instance(launched["InstanceIds"][0], request.node_name, request.pool, *offering, InstanceState.PENDING, now, tags, image["ImageId"], refused)

    def terminate(self, instance_ids: Sequence[str]) -> None:
        ids = list(instance_ids)
        for start in range(0, len(ids), TERMINATE_BATCH):
            batch = ids[start : start + TERMINATE_BATCH]
            try:
                self._call("terminate_instances", InstanceIds=batch)
            except ClientError as exc:
                if code_of(exc) not in NOT_FOUND:
                    raise translate(exc) from None
                # Some are already gone: terminate the rest one by one.
                for instance_id in batch:
                    try:
                        self._call("terminate_instances", InstanceIds=[instance_id])
                    except ClientError as one:
                        if code_of(one) not in NOT_FOUND:
                            raise translate(one) from None
            except BotoCoreError as exc:
                raise translate(exc) from None

    def list_instances(self) -> list[Instance]:
        return self._describe(
            [{"Name": f"tag:{CONTROLLER_TAG}", "Values": [self.controller_id]}, {"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )

    def describe(self, instance_id: str) -> Instance:
        try:
            reply = self._call("describe_instances", InstanceIds=[instance_id])
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from None
        for reservation in reply.get("Reservations", []):
            for record in reservation.get("Instances", []):
                return self._instance(record)
        raise NotFound(instance_id)

    def fetch_prices(self) -> PriceUpdate | None:
        """On-demand prices from the Pricing API and the last hours of spot prices per zone.
        One source failing still delivers the other; both failing raises CloudError."""
        if not self.settings.refresh_prices:
            return None
        problems: list[str] = []
        on_demand: dict[str, float] = {}
        spot: dict[tuple[str, str], float] = {}
        if self.settings.region in REGION_NAMES:
            try:
                on_demand = self._call_paged("GetProducts", lambda: on_demand_prices(self.pricing, self.settings.region), ec2=False)
            except CloudError as exc:
                problems.append(f"on-demand prices: {exc}")
        try:
            since = datetime.fromtimestamp(self.clock.now() - SPOT_HISTORY_SECONDS, tz=UTC)
            spot = self._call_paged("DescribeSpotPriceHistory", lambda: spot_prices(self.ec2, since))
        except CloudError as exc:
            problems.append(f"spot prices: {exc}")
        # Placeholders (moto answers every spot price with 0.00001) must not make spot free.
        plausible = {}
        for (name, zone), price in spot.items():
            itype = self.catalog.get(name)
            reference = on_demand.get(name) or (itype.on_demand_price if itype else 0.0)
            if reference and price >= reference * MIN_SPOT_FRACTION:
                plausible[(name, zone)] = price
        if len(plausible) < len(spot):
            log.warning("ignored %d spot prices below %.0f%% of on-demand as implausible", len(spot) - len(plausible), MIN_SPOT_FRACTION * 100)
        if problems and not on_demand and not plausible:
            raise CloudError("price refresh failed: " + "; ".join(problems))
        for problem in problems:
            log.warning("price refresh: %s", problem)
        return PriceUpdate(on_demand, plausible)

    def reservations(self, queries: Sequence[ReservationQuery], now: float) -> list[Reservation]:
        return self._call_paged("DescribeCapacityReservations", lambda: reservations.describe(self.ec2, queries, now)) if queries else []

    def _call_paged(self, what: str, fetch: Callable[[], Any], *, ec2: bool = True) -> Any:
        """A paginated read under the same retry policy (EC2's under its shared pause too);
        raises the translated error."""
        try:
            return self._retrying(what)(self._paced(what, fetch) if ec2 else fetch)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from None

    # -- helpers -------------------------------------------------------------------------------
    def _describe(self, filters: list[dict[str, Any]]) -> list[Instance]:
        out: list[Instance] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"Filters": filters, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            reply = self._checked("describe_instances", **params)
            out += [self._instance(i) for r in reply.get("Reservations", []) for i in r.get("Instances", [])]
            token = reply.get("NextToken")
            if not token:
                return sorted(out, key=lambda i: i.instance_id)

    def _find_node(self, node_name: str) -> Instance | None:
        found = self._describe(
            [
                {"Name": f"tag:{CONTROLLER_TAG}", "Values": [self.controller_id]},
                {"Name": f"tag:{NODE_TAG}", "Values": [node_name]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return found[0] if found else None

    def _instance(self, record: Mapping[str, Any]) -> Instance:
        tags = {t["Key"]: t["Value"] for t in record.get("Tags", [])}
        reservation = record.get("CapacityReservationId") or tags.get(RESERVATION_TAG, "")
        launched = record.get("LaunchTime")
        state = record.get("State", {}).get("Name", "pending")
        return Instance(
            instance_id=record["InstanceId"],
            node_name=tags.get(NODE_TAG, ""),
            pool=tags.get(POOL_TAG, ""),
            instance_type=record.get("InstanceType", ""),
            capacity_type=_capacity_type(record, reservation),
            zone=record.get("Placement", {}).get("AvailabilityZone", ""),
            state=InstanceState(state) if state in InstanceState._value2member_map_ else InstanceState.SHUTTING_DOWN,
            launched_at=launched.timestamp() if hasattr(launched, "timestamp") else self.clock.now(),
            tags=tags,
            image_id=record.get("ImageId", ""),
            reservation=reservation,
        )

    def _run_params(self, request: BootRequest) -> dict[str, Any]:
        tags = {**self.settings.tags, **launch_tags(request, self.controller_id)}
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        params: dict[str, Any] = {
            "MinCount": 1,
            "MaxCount": 1,
            "InstanceType": request.instance_type,
            "ClientToken": request.token,
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tag_list}, {"ResourceType": "volume", "Tags": tag_list}],
        }
        family = self.settings.image_family or ImageFamily.CUSTOM
        if self.boot_image.launch_template:
            key = "LaunchTemplateId" if self.boot_image.launch_template.startswith("lt-") else "LaunchTemplateName"
            params["LaunchTemplate"] = {key: self.boot_image.launch_template, "Version": "$Default"}
        else:
            image = self.images.resolve(request.instance_type, request.capacity_type, request.zone)
            family = self._family_of(image)
            params["ImageId"] = image["ImageId"]
            root = image.get("RootDeviceName") or "/dev/xvda"
            params["BlockDeviceMappings"] = [{"DeviceName": root, "Ebs": self._root_volume(request)}]
        meta = self.settings.metadata_options
        params["MetadataOptions"] = {
            "HttpEndpoint": meta.http_endpoint,
            "HttpTokens": meta.http_tokens,
            "HttpPutResponseHopLimit": meta.http_put_response_hop_limit,
        }
        if self.settings.detailed_monitoring:
            params["Monitoring"] = {"Enabled": True}
        if self.settings.security_groups:
            params["SecurityGroupIds"] = list(self.settings.security_groups)
        if self.settings.instance_profile:
            profile = self.settings.instance_profile
            params["IamInstanceProfile"] = {"Arn": profile} if ":" in profile else {"Name": profile}
        if self.settings.user_data is not None or family is not ImageFamily.CUSTOM:
            params["UserData"] = self.join.user_data(request, family)
        if request.reservation:
            params.update(reservations.targeting(request.reservation, request.capacity_block))
        if request.capacity_type is CapacityType.SPOT:
            params["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        return params

    def _family_of(self, image: dict[str, Any]) -> ImageFamily:
        """How a node of ``image`` joins its cluster: as provider.yaml says, else by the image's
        name; a family that joins through cloud.aws.eks refused without it (the node could not)."""
        if self.settings.image_family is not None:
            return self.settings.image_family
        family = family_of(image.get("Name", ""))
        if family is None:
            return ImageFamily.CUSTOM
        if self.settings.eks is None:
            raise CloudError(
                f"image {image['ImageId']} ({image.get('Name', '')}) is an EKS-optimized {family.value} image, but cloud.aws.eks is not set: its nodes "
                "could not join their cluster; give cloud.aws.eks: {name: CLUSTER}, or set cloud.aws.imageFamily: Custom and join in your userData"
            )
        return family

    def _root_volume(self, request: BootRequest) -> dict[str, Any]:
        volume = self.settings.root_volume
        ebs: dict[str, Any] = {
            "VolumeSize": max(1, -(-request.volume_bytes // 2**30)),
            "VolumeType": volume.volume_type,
            "DeleteOnTermination": True,
            "Encrypted": volume.encrypted,
        }
        if volume.iops is not None:
            ebs["Iops"] = volume.iops
        if volume.throughput is not None:
            ebs["Throughput"] = volume.throughput
        if volume.kms_key_id:
            ebs["KmsKeyId"] = volume.kms_key_id
        return ebs

    def _describe_cluster(self, name: str) -> dict[str, Any]:
        """DescribeCluster's answer for the EKS cluster nodes join (asked once, by ``NodeJoin``)."""
        assert self.eks is not None
        eks = self.eks
        return self._call_paged("DescribeCluster", lambda: eks.describe_cluster(name=name)["cluster"], ec2=False)

    def current_image(self, instance_type: str) -> str | None:
        """The image a boot of ``instance_type`` would use now, as last resolved (no call is
        made: ``refresh_images`` resolves them); None with a launch template (the template
        names the image) or before any was resolved."""
        return self.images.current(instance_type)

    def refresh_images(self, instance_types: Iterable[str]) -> None:
        """Resolve ``nodes.bootImageSpec`` again for these types' architectures, where the
        last answer is older than the cache allows (a new image then shows as drift)."""
        self.images.refresh(instance_types)


def _capacity_type(record: Mapping[str, Any], reservation: str) -> CapacityType:
    """Reserved where it runs in a reservation (EC2 says ``capacity-block`` of a Capacity
    Block's instances; moto says ``spot`` of any launched with market options), else spot or
    on-demand by its lifecycle."""
    if reservation:
        return CapacityType.RESERVED
    return CapacityType.SPOT if record.get("InstanceLifecycle") == "spot" else CapacityType.ON_DEMAND
