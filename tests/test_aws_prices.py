"""Live prices: the Pricing API and spot history (injected on top of moto), and the loop."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
from aws_helpers import aws_cloud as make_cloud
from aws_helpers import error_reply, inject, moto_env, ok_reply
from harness import Harness, arrive

from cloud.aws.client import AwsCloud, RetryPolicy
from cloud.errors import CloudError, Throttled
from nodemanager.clock import VirtualClock
from nodemanager.config.cloud_schema import AwsCloud as AwsSettings
from nodemanager.config.schema import Pool
from nodemanager.model import CapacityType

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT


def products(prices: dict[str, float]):
    items = [
        json.dumps(
            {"product": {"attributes": {"instanceType": name}}, "terms": {"OnDemand": {"t": {"priceDimensions": {"d": {"pricePerUnit": {"USD": str(usd)}}}}}}}
        )
        for name, usd in prices.items()
    ]
    return lambda params: (ok_reply(), {"PriceList": items, "FormatVersion": "aws_v1", "ResponseMetadata": {"HTTPStatusCode": 200}})


def spot_history(entries):
    rows = [
        {"InstanceType": t, "AvailabilityZone": z, "SpotPrice": str(p), "Timestamp": datetime(2026, 11, 21, h, tzinfo=UTC), "ProductDescription": "Linux/UNIX"}
        for t, z, p, h in entries
    ]
    return lambda params: (ok_reply(), {"SpotPriceHistory": rows, "ResponseMetadata": {"HTTPStatusCode": 200}})


@pytest.fixture
def aws(monkeypatch):
    with moto_env(monkeypatch):
        yield


def test_prices_from_the_pricing_api_and_spot_history(aws, catalog):
    cloud = make_cloud(catalog)
    inject_pricing = cloud.pricing.meta.events.register
    inject_pricing("before-call.pricing.GetProducts", lambda model, params, **_: products({"m5.large": 0.111})(params))
    inject(
        cloud,
        "DescribeSpotPriceHistory",
        spot_history([("m5.large", "us-east-1a", 0.03, 1), ("m5.large", "us-east-1a", 0.031, 5), ("m5.large", "us-east-1b", 0.029, 2)]),
    )
    update = cloud.fetch_prices()
    assert update.on_demand == {"m5.large": 0.111}
    assert update.spot == {("m5.large", "us-east-1a"): 0.031, ("m5.large", "us-east-1b"): 0.029}  # the latest per zone
    fresh = catalog.with_prices(update.on_demand, update.spot, "test")
    assert fresh["m5.large"].price(OD) == 0.111
    assert fresh["m5.large"].price(SPOT, "us-east-1a") == 0.031
    assert fresh["m5.large"].price(SPOT, "us-east-1c") == catalog["m5.large"].price(SPOT, "us-east-1c")  # unmentioned: kept


def test_placeholder_spot_prices_are_ignored(aws, catalog):
    cloud = make_cloud(catalog)
    cloud.pricing.meta.events.register("before-call.pricing.GetProducts", lambda model, params, **_: products({})(params))
    update = cloud.fetch_prices()  # moto answers every spot price with 0.00001
    assert update.spot == {}


def test_one_source_failing_still_delivers_the_other_and_both_failing_raises(aws, catalog):
    cloud = make_cloud(catalog)
    cloud.pricing.meta.events.register("before-call.pricing.GetProducts", lambda model, params, **_: error_reply("AccessDeniedException", 400))
    inject(cloud, "DescribeSpotPriceHistory", spot_history([("m5.large", "us-east-1a", 0.03, 1)]))
    assert cloud.fetch_prices().spot == {("m5.large", "us-east-1a"): 0.03}
    broken = make_cloud(catalog)
    broken.pricing.meta.events.register("before-call.pricing.GetProducts", lambda model, params, **_: error_reply("AccessDeniedException", 400))
    inject(broken, "DescribeSpotPriceHistory", lambda p: error_reply("UnauthorizedOperation", 403))
    with pytest.raises(CloudError, match="price refresh failed"):
        broken.fetch_prices()


def test_price_refresh_can_be_turned_off(aws, catalog):
    assert make_cloud(catalog, refresh_prices=False).fetch_prices() is None


def test_a_stop_ends_retries_at_once(aws, catalog):
    stop = threading.Event()
    cloud = AwsCloud(AwsSettings(region="us-east-1").for_cloud(), "test", catalog, VirtualClock(), retry=RetryPolicy(attempts=50, max_seconds=3600), stop=stop)
    calls = inject(cloud, "DescribeInstances", lambda p: error_reply("RequestLimitExceeded", 503))
    stop.set()
    with pytest.raises(Throttled):
        cloud.list_instances()
    assert len(calls) == 1


def test_the_prices_loop_applies_fresh_prices_and_keeps_the_last_good_ones(aws, catalog):
    clouds = []

    def factory(clock):
        clouds.append(make_cloud(catalog, clock=clock))
        return clouds[-1]

    pool = Pool(name="general", instance_types=["m5.large", "m5.xlarge"], capacity_types=[OD], zones=["us-east-1a"])
    h = Harness(pool, catalog=catalog, cloud=factory, arrivals=[arrive("p1", cpu="500m", at=5)])
    cloud = clouds[0]
    fail = {"now": True}
    cloud.pricing.meta.events.register(
        "before-call.pricing.GetProducts",
        lambda model, params, **_: error_reply("AccessDeniedException", 400) if fail["now"] else products({"m5.xlarge": 0.01})(params),
    )
    inject(cloud, "DescribeSpotPriceHistory", lambda p: error_reply("UnauthorizedOperation", 403) if fail["now"] else None)
    h.controller.prices_loop()
    assert h.controller.state.catalog.source == catalog.source  # failed: the bundled prices stay
    observed = h.controller.metrics.registry.get_sample_value("nodemanager_loop_duration_seconds_count", {"loop": "prices"})
    assert observed == 1  # a pass that gave up early is timed too
    fail["now"] = False
    h.controller.prices_loop()
    assert "refreshed" in h.controller.state.catalog.source
    assert h.controller.state.catalog["m5.xlarge"].price(OD) == 0.01
    h.run(10)
    [node] = h.controller.state.nodes.values()
    assert node.instance_type == "m5.xlarge"  # now the cheapest that fits
