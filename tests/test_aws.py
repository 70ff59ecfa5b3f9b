"""The EC2 provider against moto in process, with faults injected into the real client."""

from __future__ import annotations

import base64
import itertools

import boto3
import pytest
from aws_helpers import REGION, default_subnets, error_reply, inject, moto_env, ok_reply, throttle_share
from aws_helpers import aws_cloud as make_cloud
from botocore.exceptions import ClientError, EndpointConnectionError

from cloud.aws.errors import SubnetExhausted, is_retryable, translate
from cloud.aws.settings import USER_DATA_BYTES as USER_DATA_LIMIT
from cloud.aws.userdata import render_user_data
from cloud.base import CONTROLLER_TAG, NODE_TAG, POOL_TAG, TAINTS_TAG, BootRequest, InstanceState
from cloud.errors import CloudError, DeadlinePassed, InsufficientCapacity, NotFound, QuotaExceeded, Throttled, Unsupported, ZoneUnavailable
from nodemanager.clock import VirtualClock
from nodemanager.config.schema import BootImageSpec
from nodemanager.deadline import pass_deadline
from nodemanager.model import CapacityType, Taint, TaintEffect

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT
TEMPLATE = "#!/bin/bash\nexport NODE={node_name} POOL={pool}\nbootstrap --labels={labels} --taints={taints} ${KEEP_ME}\n"


@pytest.fixture
def aws(monkeypatch):
    with moto_env(monkeypatch):
        yield boto3.client("ec2", region_name=REGION)


def request(name="n1", itype="m5.large", capacity=OD, zone="us-east-1a", token=None, **kw):
    return BootRequest(name, "general", itype, capacity, zone, token or f"token-{name}", 50 * 2**30, **kw)


def instance_record(ec2, instance_id):
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


# -- boot -------------------------------------------------------------------------------------


def test_boot_on_demand_with_tags_image_subnet_volume_and_user_data(aws, catalog):
    iam = boto3.client("iam", region_name=REGION)
    iam.create_instance_profile(InstanceProfileName="nm-node")
    cloud = make_cloud(catalog, tags={"team": "platform"}, user_data=TEMPLATE, instance_profile="nm-node")
    labels = {"workload": "general", "node.kubernetes.io/instance-type": "m5.large"}
    instance = cloud.boot(request(zone="us-east-1b", labels=labels, taints=(Taint("dedicated", TaintEffect.NO_SCHEDULE, "web"),)))
    assert (instance.node_name, instance.pool, instance.instance_type, instance.capacity_type, instance.zone) == ("n1", "general", "m5.large", OD, "us-east-1b")
    record = instance_record(aws, instance.instance_id)
    tags = {t["Key"]: t["Value"] for t in record["Tags"]}
    assert tags == {"Name": "n1", CONTROLLER_TAG: "test", NODE_TAG: "n1", POOL_TAG: "general", TAINTS_TAG: "dedicated=web:NoSchedule", "team": "platform"}
    assert record["SubnetId"] == default_subnets()["us-east-1b"]
    newest = max(
        aws.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*-gp2"]}, {"Name": "architecture", "Values": ["x86_64"]}])[
            "Images"
        ],
        key=lambda i: (i["CreationDate"], i["ImageId"]),
    )
    assert record["ImageId"] == newest["ImageId"]
    assert record["IamInstanceProfile"]["Arn"].endswith("/nm-node")
    volume = aws.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance.instance_id]}])["Volumes"][0]
    assert volume["Size"] == 50
    user_data = base64.b64decode(aws.describe_instance_attribute(InstanceId=instance.instance_id, Attribute="userData")["UserData"]["Value"]).decode()
    assert "export NODE=n1 POOL=general" in user_data
    assert "--labels=node.kubernetes.io/instance-type=m5.large,workload=general" in user_data
    assert "--taints=dedicated=web:NoSchedule" in user_data
    assert "${KEEP_ME}" in user_data


def test_boot_spot_uses_one_time_market_options(aws, catalog):
    cloud = make_cloud(catalog)
    calls = inject(cloud, "RunInstances", lambda p: None)
    instance = cloud.boot(request(capacity=SPOT))
    assert instance.capacity_type is SPOT
    assert instance_record(aws, instance.instance_id)["InstanceLifecycle"] == "spot"
    assert calls[0]["InstanceMarketOptions.MarketType"] == "spot"
    assert calls[0]["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time"
    assert calls[0]["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"


def test_boot_is_idempotent_and_sends_the_client_token(aws, catalog):
    cloud = make_cloud(catalog)
    calls = inject(cloud, "RunInstances", lambda p: None)
    first = cloud.boot(request(token="tok-123"))
    again = cloud.boot(request(token="tok-123"))
    assert first.instance_id == again.instance_id
    assert [c["ClientToken"] for c in calls] == ["tok-123"]  # the second boot found the tagged instance
    restarted = make_cloud(catalog)  # a new process with the same controller id
    assert restarted.boot(request(token="tok-123")).instance_id == first.instance_id
    assert len(cloud.list_instances()) == 1


def test_image_resolution_explicit_ids_and_newest_match(aws, catalog):
    ami = aws.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    explicit = make_cloud(catalog, boot_image=BootImageSpec(image_ids=[ami]))
    assert instance_record(aws, explicit.boot(request("n1")).instance_id)["ImageId"] == ami
    cloud = make_cloud(catalog)
    replies = {"Images": [{"ImageId": ami, "CreationDate": "2025-01-01T00:00:00.000Z", "Architecture": "x86_64", "RootDeviceName": "/dev/xvda"}]}
    other = aws.describe_images(Owners=["amazon"])["Images"][1]["ImageId"]
    replies["Images"].append({"ImageId": other, "CreationDate": "2026-06-01T00:00:00.000Z", "Architecture": "x86_64", "RootDeviceName": "/dev/sda1"})
    calls = inject(cloud, "DescribeImages", lambda p: (ok_reply(), {**replies, "ResponseMetadata": {"HTTPStatusCode": 200}}))
    second = cloud.boot(request("n2"))
    third = cloud.boot(request("n3"))
    assert instance_record(aws, second.instance_id)["ImageId"] == other  # the newest match
    assert instance_record(aws, third.instance_id)["ImageId"] == other
    assert len(calls) == 1  # cached for the next boot


def test_instances_carry_their_image_and_a_new_spec_is_resolved_without_a_boot(aws, catalog):
    """What image drift compares: the image each instance was launched from (booted and
    listed), and the image a boot would use now, resolved by refresh_images (no boot
    needed after a restart with a new bootImageSpec); none with a launch template."""
    images = aws.describe_images(Owners=["amazon"])["Images"]
    old, new = images[0]["ImageId"], images[1]["ImageId"]
    before = make_cloud(catalog, boot_image=BootImageSpec(image_ids=[old]))
    booted = before.boot(request("n1"))
    assert booted.image_id == old
    assert before.current_image("m5.large") == old
    [listed] = before.list_instances()
    assert listed.image_id == old
    after = make_cloud(catalog, boot_image=BootImageSpec(image_ids=[new]))  # restarted with a new spec
    assert after.current_image("m5.large") is None  # not resolved yet: no drift judged
    after.refresh_images({"m5.large"})
    assert after.current_image("m5.large") == new
    templated = make_cloud(catalog, boot_image=BootImageSpec(launch_template="lt-0123456789abcdef0"))
    templated.refresh_images({"m5.large"})  # nothing to resolve: the template names its image
    assert templated.current_image("m5.large") is None


def test_arm_types_get_an_arm_image_or_are_unsupported(aws, catalog):
    arm = make_cloud(catalog).boot(request("n1", itype="m6g.large"))
    assert aws.describe_images(ImageIds=[instance_record(aws, arm.instance_id)["ImageId"]])["Images"][0]["Architecture"] == "arm64"
    x86_only = make_cloud(catalog, controller_id="other", boot_image=BootImageSpec(owners=["amazon"], filters={"name": ["*x86_64*"]}))
    with pytest.raises(Unsupported, match="no arm64 image"):
        x86_only.boot(request("n2", itype="m6g.large"))


def test_empty_boot_image_spec_is_a_clear_error(aws, catalog):
    with pytest.raises(CloudError, match=r"nodes\.bootImageSpec is empty"):
        make_cloud(catalog, boot_image=BootImageSpec()).boot(request())


def test_subnet_selection(aws, catalog):
    subnets = default_subnets()
    cloud = make_cloud(catalog, subnets=[subnets["us-east-1a"], subnets["us-east-1c"]])
    assert cloud.boot(request("n1", zone="us-east-1c")).zone == "us-east-1c"
    with pytest.raises(Unsupported, match="no configured subnet is in us-east-1b"):
        cloud.boot(request("n2", zone="us-east-1b"))
    aws.create_tags(Resources=[subnets["us-east-1d"]], Tags=[{"Key": "nodemanager", "Value": "yes"}])
    selected = make_cloud(catalog, subnet_selector={"nodemanager": "yes"})
    assert selected.boot(request("n3", zone="us-east-1d")).zone == "us-east-1d"


def test_user_data_over_16kb_once_filled_in_is_refused_before_the_call(aws, catalog):
    """The template is checked against the limit when the config is read; what is filled in
    (the pool's labels) can still take it over, which the boot refuses without a call."""
    cloud = make_cloud(catalog, user_data="{labels}\n" + "#" * (USER_DATA_LIMIT - 1100))
    calls = inject(cloud, "RunInstances", lambda p: None)
    labels = {f"example.com/label-{i}": "v" * 40 for i in range(40)}
    with pytest.raises(CloudError, match="over EC2's limit"):
        cloud.boot(request(labels=labels))
    assert calls == []


def test_user_data_over_the_limit_is_refused_when_the_config_is_read():
    from nodemanager.config.cloud_schema import AwsCloud

    with pytest.raises(ValueError, match="more than the 15,360 allowed"):
        AwsCloud(region=REGION, userData="#" * (USER_DATA_LIMIT - 1000))


def test_render_user_data_leaves_other_braces():
    assert render_user_data("{node_name} ${HOME} {unknown} {{x}}", {"node_name": "n1"}) == "n1 ${HOME} {unknown} {{x}}"


# -- find, describe, terminate --------------------------------------------------------------


def test_list_paginates_over_hundreds_and_terminate_batches(aws, catalog):
    cloud = make_cloud(catalog)
    image = aws.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [{"Key": CONTROLLER_TAG, "Value": "test"}, {"Key": NODE_TAG, "Value": "bulk"}]
    aws.run_instances(ImageId=image, MinCount=230, MaxCount=230, InstanceType="m5.large", TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    aws.run_instances(ImageId=image, MinCount=3, MaxCount=3, InstanceType="m5.large")  # not ours
    listed = cloud.list_instances()
    assert len(listed) == 230
    terminates = inject(cloud, "TerminateInstances", lambda p: None)
    cloud.terminate([i.instance_id for i in listed] + ["i-0123456789abcdef0"])  # one already unknown
    assert cloud.list_instances() == []
    assert len(terminates) >= 1
    assert cloud.describe(listed[0].instance_id).state is InstanceState.TERMINATED


def test_list_follows_next_token(aws, catalog):
    """moto answers in one page; EC2 pages by 100. Pages injected into the real client."""
    cloud = make_cloud(catalog)
    record = {"InstanceId": "", "InstanceType": "m5.large", "State": {"Name": "running"}, "Placement": {"AvailabilityZone": "us-east-1a"}, "Tags": []}
    pages = {None: ("t1", ["i-1", "i-2"]), "t1": ("t2", ["i-3"]), "t2": (None, ["i-4"])}

    def page(params):
        following, ids = pages[params.get("NextToken")]
        body = {"Reservations": [{"Instances": [{**record, "InstanceId": i} for i in ids]}], "ResponseMetadata": {"HTTPStatusCode": 200}}
        if following:
            body["NextToken"] = following
        return ok_reply(), body

    calls = inject(cloud, "DescribeInstances", page)
    assert [i.instance_id for i in cloud.list_instances()] == ["i-1", "i-2", "i-3", "i-4"]
    assert [int(c["MaxResults"]) for c in calls] == [100, 100, 100]


def test_describe_unknown_is_not_found(aws, catalog):
    with pytest.raises(NotFound):
        make_cloud(catalog).describe("i-0123456789abcdef0")


# -- errors ------------------------------------------------------------------------------------


def client_error(code, status=400):
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "RunInstances")


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("InsufficientInstanceCapacity", 400, InsufficientCapacity),
        ("InsufficientCapacity", 400, InsufficientCapacity),
        ("InsufficientFreeAddressesInSubnet", 400, SubnetExhausted),
        ("InsufficientAddressCapacity", 400, SubnetExhausted),
        ("InstanceLimitExceeded", 400, QuotaExceeded),
        ("MaxSpotInstanceCountExceeded", 400, QuotaExceeded),
        ("VcpuLimitExceeded", 400, QuotaExceeded),
        ("Unsupported", 400, Unsupported),
        ("RequestLimitExceeded", 503, Throttled),
        ("Throttling", 400, Throttled),
        ("InternalError", 500, Throttled),
        ("InvalidInstanceID.NotFound", 400, NotFound),
        ("InvalidParameterValue", 400, CloudError),
        ("UnauthorizedOperation", 403, CloudError),
    ],
)
def test_error_codes_map_to_types(code, status, kind):
    error = translate(client_error(code, status), instance_type="m5.large", capacity_type=SPOT, zone="us-east-1b", subnet="subnet-1")
    assert type(error) is kind
    if isinstance(error, InsufficientCapacity | Unsupported):
        assert (error.instance_type, error.capacity_type, error.zone) == ("m5.large", SPOT, "us-east-1b")  # spot recorded as spot


def test_only_throttling_5xx_and_connection_errors_are_retryable():
    assert is_retryable(client_error("RequestLimitExceeded", 503))
    assert is_retryable(client_error("Whatever", 502))
    assert is_retryable(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert not is_retryable(client_error("InsufficientInstanceCapacity"))
    assert not is_retryable(client_error("InvalidParameterValue"))


@pytest.mark.parametrize(
    "code",
    [
        *("InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity", "InsufficientFreeAddressesInSubnet"),
        *("VcpuLimitExceeded", "InstanceLimitExceeded", "Unsupported", "InvalidSubnetID.NotFound", "InvalidAMIID.NotFound", "InvalidInstanceID.NotFound"),
    ],
)
def test_a_code_that_names_the_failure_is_never_retried_whatever_the_http_status(code):
    """EC2 answers the capacity codes with HTTP 500: the code decides, not the status."""
    assert not is_retryable(client_error(code, 500))
    assert not isinstance(translate(client_error(code, 500)), Throttled)


def test_throttled_calls_are_retried_with_backoff_then_give_up(aws, catalog):
    clock = VirtualClock(1000.0)
    cloud = make_cloud(catalog, clock=clock)
    sent: list[float] = []
    always = inject(cloud, "RunInstances", lambda p: sent.append(clock.now()) or error_reply("RequestLimitExceeded", 503))
    with pytest.raises(Throttled, match="retries exhausted"):
        cloud.boot(request())
    assert len(always) == 6  # bounded attempts
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert all(0 < g <= 17 for g in gaps)  # its own backoff (at most 8.5 s) or the shared pause (1, 2, 4, 8, 16 s)
    assert gaps[-1] > gaps[0]  # growing


def test_a_pass_deadline_ends_retries_and_refuses_new_calls(aws, catalog):
    """Through an outage each call retries for up to half a minute: under a loop pass's
    deadline no wait ends past it, and once it has passed no call is made at all."""
    clock, sleeps = VirtualClock(1000.0), []
    cloud = make_cloud(catalog, clock=clock, sleeps=sleeps)
    calls = inject(cloud, "TerminateInstances", lambda p: error_reply("InternalError", 503))
    with pass_deadline(clock, 5.0):
        with pytest.raises(Throttled, match="retries exhausted") as first:
            cloud.terminate(["i-1"])
        assert not isinstance(first.value, DeadlinePassed)
        assert 1 < len(calls) < 6  # retried, but fewer times than without a deadline
        assert clock.now() <= 1005.0  # no wait ended past the deadline
        clock.advance(5.0)
        with pytest.raises(DeadlinePassed, match="terminate_instances not called"):
            cloud.terminate(["i-2"])
    assert all("i-2" not in str(c) for c in calls)  # nothing was sent for i-2
    calls.clear()
    with pytest.raises(Throttled):
        cloud.terminate(["i-3"])  # outside a pass: the whole retry policy
    assert len(calls) == 6


def test_a_dropped_connection_is_reported_as_an_unreachable_endpoint():
    error = translate(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert isinstance(error, Throttled)
    assert str(error).startswith("cloud endpoint unreachable: Could not connect")


@pytest.mark.parametrize("status", [400, 500])  # EC2 sends the Insufficient*Capacity codes with HTTP 500
def test_capacity_errors_are_not_retried(aws, catalog, status):
    cloud = make_cloud(catalog)
    calls = inject(cloud, "RunInstances", lambda p: error_reply("InsufficientInstanceCapacity", status))
    with pytest.raises(InsufficientCapacity) as err:
        cloud.boot(request(capacity=SPOT, zone="us-east-1c"))
    assert len(calls) == 1
    assert (err.value.capacity_type, err.value.zone) == (SPOT, "us-east-1c")


def test_thirty_percent_throttling_still_boots_everything(aws, catalog):
    cloud = make_cloud(catalog)
    inject(cloud, "*", throttle_share(0.3, seed=4))
    ids = {cloud.boot(request(f"n{i}")).instance_id for i in range(20)}
    assert len(ids) == 20
    cloud.ec2.meta.events.unregister("before-call.ec2", None)
    names = sorted(i.node_name for i in make_cloud(catalog).list_instances())
    assert names == sorted(f"n{i}" for i in range(20))  # each launched exactly once


def test_exhausted_subnet_falls_back_to_the_zones_other_subnet_then_reports_the_zone(aws, catalog):
    subnets = default_subnets()
    vpc = aws.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    extra = aws.create_subnet(VpcId=vpc, CidrBlock="172.31.200.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    cloud = make_cloud(catalog, subnets=[subnets["us-east-1a"], extra, subnets["us-east-1b"]])
    full = {subnets["us-east-1a"]}
    inject(cloud, "RunInstances", lambda p: error_reply("InsufficientFreeAddressesInSubnet") if p.get("SubnetId") in full else None)
    first = cloud.boot(request("n1"))
    assert instance_record(aws, first.instance_id)["SubnetId"] == extra
    full.add(extra)
    with pytest.raises(ZoneUnavailable) as err:
        cloud.boot(request("n2"))
    assert err.value.zone == "us-east-1a"


def test_a_subnet_the_cloud_no_longer_knows_drops_the_cached_subnets_at_once(aws, catalog):
    """The endpoint was reset (or the subnet deleted): the cached subnet id is stale. The
    failed boot says so and the next boot looks the subnets up again instead of failing
    for the cache's whole five minutes."""
    vpc = aws.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    old = aws.create_subnet(VpcId=vpc, CidrBlock="172.31.201.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    aws.create_tags(Resources=[old], Tags=[{"Key": "nodemanager", "Value": "nodes"}])
    cloud = make_cloud(catalog, subnet_selector={"nodemanager": "nodes"})
    first = cloud.boot(request("n1"))
    assert instance_record(aws, first.instance_id)["SubnetId"] == old
    new = aws.create_subnet(VpcId=vpc, CidrBlock="172.31.202.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    aws.create_tags(Resources=[new], Tags=[{"Key": "nodemanager", "Value": "nodes"}])
    aws.create_tags(Resources=[old], Tags=[{"Key": "nodemanager", "Value": "retired"}])
    gone = {old}
    missing = error_reply("InvalidSubnetID.NotFound", 400, f"The subnet ID '{old}' does not exist")
    inject(cloud, "RunInstances", lambda p: missing if p.get("SubnetId") in gone else None)
    with pytest.raises(CloudError, match=r"InvalidSubnetID\.NotFound"):
        cloud.boot(request("n2"))
    second = cloud.boot(request("n3"))  # same virtual instant: only a dropped cache explains the new subnet
    assert instance_record(aws, second.instance_id)["SubnetId"] == new


def _calls_per_minute_under_sustained_throttling(catalog, shared: bool) -> tuple[float, float]:
    """Boots, orphan listings and heartbeats taking turns for ten virtual minutes while every
    call is answered RequestLimitExceeded: EC2 calls in the first and in the last minute."""
    clock = VirtualClock(1000.0)
    cloud = make_cloud(catalog, clock=clock)
    if not shared:
        cloud.pause.wait = lambda operation: None  # each call backs off alone
    sent: list[float] = []
    inject(cloud, "*", lambda p: sent.append(clock.now()) or error_reply("RequestLimitExceeded", 503))
    callers = [lambda: cloud.boot(request("n1")), cloud.list_instances, lambda: cloud.describe("i-0123456789abcdef0")]
    turn = 0
    while clock.now() < 1600.0:
        with pytest.raises(Throttled):
            callers[turn % 3]()
        turn += 1
        clock.advance(1.0)  # the loops' own pace between passes
    first = sum(1 for t in sent if t < 1060.0)
    last = sum(1 for t in sent if 1540.0 <= t < 1600.0)
    return first, last


def test_sustained_throttling_lowers_the_call_rate_for_every_caller(aws, catalog):
    """A throttling answer pauses every EC2 caller, doubling up to a minute: the call rate
    falls as throttling lasts, where per-call backoff alone keeps it flat."""
    alone_first, alone_last = _calls_per_minute_under_sustained_throttling(catalog, shared=False)
    shared_first, shared_last = _calls_per_minute_under_sustained_throttling(catalog, shared=True)
    assert alone_last >= alone_first * 0.8  # per-call backoff: flat
    assert shared_last <= shared_first / 4  # shared pause: falls
    assert shared_last <= alone_last / 5
    assert shared_last >= 1  # still asking (once a minute)


def test_the_shared_pause_is_waited_out_by_the_next_caller_and_ends_at_a_success(aws, catalog):
    clock = VirtualClock(1000.0)
    sleeps: list[float] = []
    cloud = make_cloud(catalog, clock=clock, sleeps=sleeps)
    answers = iter([error_reply("RequestLimitExceeded", 503)])
    inject(cloud, "DescribeInstances", lambda p: next(answers, None))
    cloud.list_instances()  # throttled once, retried after its own backoff and the pause
    assert cloud.pause.throttled_answers == 1
    assert sum(sleeps) == pytest.approx(1.0)  # its own backoff, then the rest of the pause
    sleeps.clear()
    cloud.list_instances()
    assert sleeps == []  # the success ended the pause


def test_a_shared_pause_past_the_pass_deadline_refuses_the_call(aws, catalog):
    clock = VirtualClock(1000.0)
    cloud = make_cloud(catalog, clock=clock)
    calls = inject(cloud, "DescribeInstances", lambda p: error_reply("RequestLimitExceeded", 503))
    for _ in range(6):
        cloud.pause.throttled(clock.now())  # a long pause: 32 s
    with pass_deadline(clock, 5.0), pytest.raises(DeadlinePassed):
        cloud.list_instances()
    assert calls == []


def test_launches_require_imdsv2_and_encrypt_the_root_volume_by_default(aws, catalog):
    """Karpenter's defaults: IMDSv2 only with a hop limit of 1 (a pod cannot reach the node
    role's credentials), and an encrypted gp3 root volume."""
    cloud = make_cloud(catalog)
    calls = inject(cloud, "RunInstances", lambda p: None)
    instance = cloud.boot(request())
    sent = calls[0]
    metadata = {k.removeprefix("MetadataOptions."): v for k, v in sent.items() if k.startswith("MetadataOptions.")}
    assert metadata == {"HttpTokens": "required", "HttpPutResponseHopLimit": 1, "HttpEndpoint": "enabled"}
    assert sent["BlockDeviceMapping.1.Ebs.Encrypted"] in (True, "true")
    assert sent["BlockDeviceMapping.1.Ebs.VolumeType"] == "gp3"
    assert "Monitoring.Enabled" not in sent
    record = instance_record(aws, instance.instance_id)
    assert record["MetadataOptions"]["HttpTokens"] == "required"
    volume = aws.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance.instance_id]}])["Volumes"][0]
    assert volume["Encrypted"] is True


def test_launch_settings_from_provider_yaml(aws, catalog):
    from nodemanager.config.cloud_schema import MetadataOptions, RootVolume

    cloud = make_cloud(
        catalog,
        metadata_options=MetadataOptions(http_put_response_hop_limit=2),
        root_volume=RootVolume(iops=6000, throughput=500, kms_key_id="arn:aws:kms:us-east-1:111122223333:key/abc"),
        detailed_monitoring=True,
    )
    calls = inject(cloud, "RunInstances", lambda p: None)
    cloud.boot(request())
    sent = calls[0]
    assert sent["MetadataOptions.HttpPutResponseHopLimit"] == 2
    assert (sent["BlockDeviceMapping.1.Ebs.Iops"], sent["BlockDeviceMapping.1.Ebs.Throughput"]) == (6000, 500)
    assert sent["BlockDeviceMapping.1.Ebs.KmsKeyId"] == "arn:aws:kms:us-east-1:111122223333:key/abc"
    assert sent["Monitoring.Enabled"] in (True, "true")


@pytest.mark.parametrize(
    ("volume", "problem"),
    [
        ({"volumeType": "gp2", "throughput": 200}, "throughput is a gp3 setting"),
        ({"volumeType": "io2"}, "io2 needs iops"),
        ({"encrypted": False, "kmsKeyID": "k"}, "kmsKeyID needs encrypted: true"),
    ],
)
def test_inconsistent_root_volumes_are_refused(volume, problem):
    from nodemanager.config.cloud_schema import RootVolume

    with pytest.raises(ValueError, match=problem):
        RootVolume.model_validate(volume)


def test_an_al2023_boot_sends_the_node_config_in_its_user_data(aws, catalog):
    from email import message_from_string

    from cloud.aws.settings import ImageFamily
    from nodemanager.config.cloud_schema import EksCluster

    eks = EksCluster(name="prod-east", endpoint="https://abc.gr7.us-east-1.eks.amazonaws.com", certificateAuthority="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==")
    cloud = make_cloud(catalog, image_family=ImageFamily.AL2023, eks=eks)
    instance = cloud.boot(request(labels={"team": "web"}))
    sent = base64.b64decode(aws.describe_instance_attribute(InstanceId=instance.instance_id, Attribute="userData")["UserData"]["Value"]).decode()
    [part] = [p for p in message_from_string(sent).walk() if not p.is_multipart()]
    assert part.get_content_type() == "application/node.eks.aws"
    assert "name: prod-east" in part.get_payload()
    assert "--node-labels=team=web" in part.get_payload()


def test_a_success_ends_the_pause_for_callers_still_waiting_on_it(aws, catalog):
    clock = VirtualClock(1000.0)
    sleeps: list[float] = []
    cloud = make_cloud(catalog, clock=clock, sleeps=sleeps)
    for _ in range(6):
        cloud.pause.throttled(clock.now())  # a pause of 32 s runs
    cloud.pause.succeeded()  # a call sent before it began came back fine
    cloud.list_instances()
    assert sleeps == []


def test_every_failed_attempt_is_counted_by_operation_and_code(aws, catalog):
    """/metrics' cloud error and throttle counters: each attempt the endpoint refused, by its
    code, throttling apart; an attempt that never reached it, by the error's class."""
    cloud = make_cloud(catalog, clock=VirtualClock(1000.0))
    inject(cloud, "RunInstances", lambda p: error_reply("RequestLimitExceeded", 503))
    with pytest.raises(Throttled):
        cloud.boot(request())
    inject(cloud, "TerminateInstances", lambda p: error_reply("UnauthorizedOperation", 403))
    with pytest.raises(CloudError):
        cloud.terminate(["i-1"])
    assert cloud.errors.errors() == {("run_instances", "RequestLimitExceeded"): 6, ("terminate_instances", "UnauthorizedOperation"): 1}
    assert cloud.errors.throttled() == {"run_instances": 6}


def test_an_eks_cluster_named_alone_is_read_once_with_describe_cluster(aws, catalog):
    """`eks: {name: prod}`: the endpoint, CA and service CIDR a node needs come from the
    cluster (as Karpenter reads them), at the first boot, once."""
    import yaml

    from cloud.aws.settings import ImageFamily
    from nodemanager.config.cloud_schema import EksCluster

    eks = boto3.client("eks", region_name=REGION)
    made = eks.create_cluster(
        name="prod",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"},
    )["cluster"]
    cloud = make_cloud(catalog, image_family=ImageFamily.AL2023, eks=EksCluster(name="prod"))
    calls = []
    cloud.eks.meta.events.register("before-call.eks.DescribeCluster", lambda **_: calls.append(1))
    for name in ("n1", "n2"):
        instance = cloud.boot(request(name))
        text = base64.b64decode(aws.describe_instance_attribute(InstanceId=instance.instance_id, Attribute="userData")["UserData"]["Value"]).decode()
        node_config = yaml.safe_load(text.split("Content-Type: application/node.eks.aws", 1)[1].split("\n\n", 1)[1].split("\n--", 1)[0])
        assert node_config["spec"]["cluster"] == {
            "name": "prod",
            "apiServerEndpoint": made["endpoint"],
            "certificateAuthority": made["certificateAuthority"]["data"],
            "cidr": "172.20.0.0/16",
        }
    assert len(calls) == 1


def test_a_cluster_that_does_not_exist_fails_the_boot_saying_so_and_a_complete_one_is_never_read(aws, catalog):
    from cloud.aws.settings import ImageFamily
    from nodemanager.config.cloud_schema import EksCluster

    cloud = make_cloud(catalog, image_family=ImageFamily.AL2023, eks=EksCluster(name="nope"))
    with pytest.raises(CloudError, match="nope"):
        cloud.boot(request())
    assert aws.describe_instances()["Reservations"] == []  # nothing launched without its way to join
    given = EksCluster(name="prod", endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com", certificateAuthority="Q0EtZGF0YS1iYXNlNjQtZm9yLXRlc3Rz")
    cloud = make_cloud(catalog, image_family=ImageFamily.AL2023, eks=given)
    calls = []
    cloud.eks.meta.events.register("before-call.eks.DescribeCluster", lambda **_: calls.append(1))
    cloud.boot(request())
    assert calls == []
