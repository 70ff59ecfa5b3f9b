"""moto in process, and faults injected into the real botocore client on top of it."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from moto import mock_aws

from cloud.aws.client import AwsCloud, RetryPolicy
from cloud.catalog import Catalog
from nodemanager.clock import Clock, VirtualClock
from nodemanager.config.cloud_schema import AwsCloud as AwsSettings
from nodemanager.config.schema import BootImageSpec

REGION = "us-east-1"
IMAGE_SPEC = BootImageSpec(owners=["amazon"], filters={"name": ["amzn2-ami-hvm-*-gp2"]})


@contextmanager
def moto_env(monkeypatch: Any) -> Iterator[None]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


@contextmanager
def moto_server(monkeypatch: Any) -> Iterator[str]:
    """A moto server on 127.0.0.1 and test credentials in the environment: its endpoint URL."""
    from moto.server import ThreadedMotoServer
    from test_cli_service import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def aws_cloud(
    catalog: Catalog,
    clock: Clock | None = None,
    controller_id: str = "test",
    sleeps: list[float] | None = None,
    boot_image: BootImageSpec = IMAGE_SPEC,
    **settings: Any,
) -> AwsCloud:
    """Retries never sleep for real: each wait is recorded in ``sleeps`` and, on a virtual
    clock, moves it on."""
    recorded = sleeps if sleeps is not None else []
    clock = clock or VirtualClock(1000.0)

    def sleep(seconds: float) -> None:
        recorded.append(seconds)
        if isinstance(clock, VirtualClock):
            clock.advance(seconds)

    return AwsCloud(
        AwsSettings(region=REGION, **settings).for_cloud(),  # as the configuration gives them
        controller_id,
        catalog,
        clock,
        boot_image=boot_image.for_cloud(),
        retry=RetryPolicy(attempts=6, max_seconds=60, initial=0.5, cap=8),
        sleep=sleep,
    )


@dataclass
class _Response:
    status_code: int
    headers: dict[str, str]


def ok_reply() -> _Response:
    return _Response(200, {})


def error_reply(code: str, status: int = 400, message: str = "injected") -> tuple[_Response, dict[str, Any]]:
    return _Response(status, {}), {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}


def inject(cloud: AwsCloud, operation: str, decide: Callable[[dict[str, Any]], tuple[_Response, dict[str, Any]] | None]) -> list[dict[str, Any]]:
    """Call ``decide(params)`` before every ``operation`` ("*" for all) on the real client;
    a reply it returns is what botocore sees instead of the endpoint's. Returns the log of
    every call's parameters."""
    calls: list[dict[str, Any]] = []

    def handler(model: Any, params: dict[str, Any], **_: Any) -> Any:
        calls.append({"operation": model.name, **params.get("body", {})})
        return decide({"operation": model.name, **params.get("body", {})})

    event = f"before-call.ec2.{operation}" if operation != "*" else "before-call.ec2"
    cloud.ec2.meta.events.register(event, handler)
    return calls


def throttle_share(share: float, seed: int = 0) -> Callable[[dict[str, Any]], Any]:
    rng = random.Random(seed)
    return lambda params: error_reply("RequestLimitExceeded", 503, "Request limit exceeded.") if rng.random() < share else None


def default_subnets() -> dict[str, str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    return {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]}
