"""Price overrides (``catalog.priceOverrides``): what an account pays instead of the list
price. Checked per consumer: the type the scaler boots, the ``catalog`` command, the
simulation's bound, the price consolidation sees, and prices refreshed from the cloud; and
every bad rule refused with its key path."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from cloud.base import PriceUpdate
from nodemanager.cli import main
from nodemanager.config import parse_config
from nodemanager.config.catalog_schema import PriceOverride
from nodemanager.config.prices import overridden
from nodemanager.controller.prices import PriceRefresher
from nodemanager.errors import ConfigError
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.scaler.pools import pool_views

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT
POOL = "pools: [{name: general, instanceTypes: ['m5.*', 'r5.*'], capacityTypes: [on-demand]}]\n"
R5_HALF = "catalog: {priceOverrides: [{instanceTypes: ['r5.*'], multiplier: 0.5, reason: Savings Plan}]}\n"


def load(text: str):  # type: ignore[no-untyped-def]
    return parse_config(text, "provider.yaml", Path("."))


def pod(name: str = "p0", cpu: int = 1000, memory: int = 4 << 30) -> Pod:
    return Pod("default", name, f"u-{name}", Resources({"cpu": cpu, "memory": memory}))


def test_the_first_matching_rule_prices_an_offering_and_the_rest_keep_the_list_price() -> None:
    _, listed = load(POOL)
    rules = [
        PriceOverride(instance_types=["m5.xlarge"], capacity_types=[OD], zones=["us-east-1a"], price=0.01),
        PriceOverride(instance_types=["m5.*"], multiplier=2),
    ]
    catalog = overridden(listed, rules)
    assert catalog["m5.xlarge"].price(OD, "us-east-1a") == 0.01
    assert catalog["m5.xlarge"].price(OD, "us-east-1b") == pytest.approx(2 * listed["m5.xlarge"].price(OD, "us-east-1b"))
    assert catalog["m5.xlarge"].price(SPOT, "us-east-1a") == pytest.approx(2 * listed["m5.xlarge"].price(SPOT, "us-east-1a"))
    assert catalog["m5.xlarge"].on_demand_price == 0.01  # the lowest of its on-demand offerings
    assert catalog["r5.large"] is listed["r5.large"]
    assert catalog.hourly("m5.large", OD, "us-east-1c") == pytest.approx(2 * listed.hourly("m5.large", OD, "us-east-1c"))  # what consolidation prices nodes by
    assert overridden(listed, []) is listed


def test_an_override_making_r5_cheaper_than_m5_changes_the_type_the_scaler_boots() -> None:
    def booted(text: str) -> str:
        config, catalog = load(text)
        scaler = BindingNodeScaler(ScalerSettings(tuple(config.pools), config.nodes), catalog)
        [node] = scaler.compute(ClusterSnapshot((pod(),), ()), 0.0).start
        return node.instance_type

    assert booted(POOL) == "m5.large"  # $0.096 against r5.large's $0.126
    assert booted(POOL + R5_HALF) == "r5.large"  # $0.063


def test_the_catalog_command_lists_overridden_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def cheapest(text: str) -> dict:
        path = tmp_path / "provider.yaml"
        path.write_text(text)
        assert (
            main(
                [
                    "catalog",
                    "--config",
                    str(path),
                    "--fits",
                    "cpu=1,memory=4Gi",
                    "--instance-types",
                    "m5.*",
                    "r5.*",
                    "--capacity-type",
                    "on-demand",
                    "--json",
                    "--limit",
                    "1",
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out)[0]

    assert (cheapest(POOL)["instance_type"], cheapest(POOL)["price_per_hour"]) == ("m5.large", 0.096)
    assert (cheapest(POOL + R5_HALF)["instance_type"], cheapest(POOL + R5_HALF)["price_per_hour"]) == ("r5.large", 0.063)


def test_the_bound_is_priced_with_the_overrides() -> None:
    pods = [pod(f"p{i}", 1500, 6 << 30) for i in range(40)]
    hours = {p.key: 3600.0 for p in pods}

    def bound(text: str) -> float:
        config, catalog = load(text)
        return CostBound(pool_views(config.pools, catalog, config.nodes.volume_size), pods).usd(hours)

    listed, discounted = bound(POOL), bound(POOL + R5_HALF)
    assert discounted < listed * 0.8  # r5 at half price is the cheaper memory and CPU


def test_check_config_shows_each_rule_and_what_it_matches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "provider.yaml"
    path.write_text(POOL + R5_HALF)
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "price override 0: r5.* (every capacity type, every zone) x 0.5: 90 offering(s) match; Savings Plan" in out


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("{instanceTypes: ['r5.*']}", "catalog.priceOverrides[0]: give multiplier or price (one of them)"),
        ("{instanceTypes: ['r5.*'], multiplier: 0.5, price: 1}", "catalog.priceOverrides[0]: give multiplier or price (one of them)"),
        ("{instanceTypes: ['r5.*'], multiplier: 0}", "catalog.priceOverrides[0].multiplier: must be > 0"),
        ("{instanceTypes: ['r5.*'], price: 0}", "catalog.priceOverrides[0].price: must be > 0"),
        ("{instanceTypes: ['zz*'], multiplier: 2}", "catalog.priceOverrides[0].instanceTypes[0]: 'zz*' matches no instance type in the us-east-1 catalog"),
        ("{instanceTypes: ['r5.*'], zones: [mars-1a], multiplier: 2}", "catalog.priceOverrides[0].zones[0]: unknown zone 'mars-1a'"),
        ("{instanceTypes: ['p4d.24xlarge'], capacityTypes: [spot], zones: [us-east-1e], multiplier: 2}", "catalog.priceOverrides[0]: prices no offering"),
        ("{instanceTypes: ['r5.*'], multiplier: 2, discount: 3}", "catalog.priceOverrides[0].discount: unknown key"),
    ],
)
def test_a_bad_rule_is_refused_with_its_key_path(rule: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(POOL + f"catalog: {{priceOverrides: [{rule}]}}\n")
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems


def test_refreshed_list_prices_are_overridden_again() -> None:
    config, catalog = load(POOL + R5_HALF)
    handed: list = []
    state = SimpleNamespace(catalog=catalog, config=config, clock=SimpleNamespace(now=lambda: 100.0), lock=threading.Lock())
    cloud = SimpleNamespace(fetch_prices=lambda: PriceUpdate(on_demand={"r5.large": 0.2, "m5.large": 0.1}, spot={}))
    PriceRefresher(state, cloud, handed.append).run()  # type: ignore[arg-type]
    [fresh] = handed
    assert fresh["r5.large"].price(OD, "us-east-1a") == pytest.approx(0.1)  # the new list price, halved
    assert fresh["m5.large"].price(OD, "us-east-1a") == pytest.approx(0.1)
    assert "price override" in fresh.source


def test_a_refresh_that_leaves_a_type_out_does_not_apply_its_override_twice() -> None:
    config, catalog = load(POOL + R5_HALF)
    state = SimpleNamespace(catalog=catalog, config=config, clock=SimpleNamespace(now=lambda: 100.0), lock=threading.Lock())
    cloud = SimpleNamespace(fetch_prices=lambda: PriceUpdate(on_demand={"m5.large": 0.1}, spot={}))

    def reprice(fresh):  # type: ignore[no-untyped-def]
        state.catalog = fresh

    refresher = PriceRefresher(state, cloud, reprice)  # type: ignore[arg-type]
    for _ in range(3):
        refresher.run()
        assert state.catalog["r5.large"].price(OD, "us-east-1a") == pytest.approx(0.063)  # $0.126 listed, halved once


def test_check_config_exits_2_naming_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "provider.yaml"
    path.write_text(POOL + "catalog: {priceOverrides: [{instanceTypes: ['r5.*'], multiplier: 0.5}, {instanceTypes: ['nope.*'], price: 1}]}\n")
    assert main(["check-config", str(path)]) == 2
    assert "catalog.priceOverrides[1].instanceTypes[0]: 'nope.*' matches no instance type" in capsys.readouterr().err
