"""Spot prices from a file of EC2's spot price history (``catalog.spotPriceHistory``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloud.catalog import Catalog
from cloud.spot_history import spot_history_file
from nodemanager.cli import main
from nodemanager.config import parse_config
from nodemanager.errors import ConfigError
from nodemanager.model import CapacityType

SPOT = CapacityType.SPOT


def entry(itype: str, zone: str, price: str, when: str, product: str = "Linux/UNIX") -> dict[str, str]:
    return {"AvailabilityZone": zone, "InstanceType": itype, "ProductDescription": product, "SpotPrice": price, "Timestamp": when}


HISTORY = {
    "SpotPriceHistory": [
        entry("m5.large", "us-east-1a", "0.0410", "2026-11-20T10:00:00+00:00"),
        entry("m5.large", "us-east-1a", "0.0377", "2026-11-21T10:00:00+00:00"),  # the latest wins
        entry("m5.large", "us-east-1b", "0.0520", "2026-11-19T08:00:00.000Z"),
        entry("m5.large", "us-east-1b", "0.2000", "2026-11-22T08:00:00.000Z", product="Windows"),  # not Linux
        entry("c5.xlarge", "us-east-1c", "0.0698", "2026-11-21T12:30:00"),
    ]
}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "spot.json"
    path.write_text(json.dumps(data))
    return path


def test_the_latest_linux_price_of_each_type_and_zone(tmp_path):
    prices, newest = spot_history_file(write(tmp_path, HISTORY))
    assert prices == {("m5.large", "us-east-1a"): 0.0377, ("m5.large", "us-east-1b"): 0.052, ("c5.xlarge", "us-east-1c"): 0.0698}
    assert f"{newest:%Y-%m-%d %H:%M}" == "2026-11-21 12:30"


def test_the_file_prices_spot_and_the_rest_keeps_the_fraction(tmp_path):
    path = write(tmp_path, HISTORY)
    _, catalog = parse_config(f"catalog: {{spotPriceHistory: {path}}}\npools: [{{name: a}}]\n", "provider.yaml", tmp_path)
    listed = Catalog.bundled()
    assert catalog.hourly("m5.large", SPOT, "us-east-1a") == 0.0377
    assert catalog.hourly("m5.large", SPOT, "us-east-1b") == 0.052
    assert catalog.hourly("m5.large", SPOT, "us-east-1c") == listed.hourly("m5.large", SPOT, "us-east-1c")  # not in the file
    assert "spot prices of" in catalog.source
    assert "newest 2026-11-21 12:30 UTC" in catalog.source


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"Items": []}, "not a spot price history"),
        ({"SpotPriceHistory": [entry("m5.large", "us-east-1a", "cheap", "2026-11-21T10:00:00Z")]}, r"SpotPriceHistory\[0\]: SpotPrice 'cheap' is not a number"),
        ({"SpotPriceHistory": [entry("m5.large", "us-east-1a", "-1", "2026-11-21T10:00:00Z")]}, "is not a price"),
        ({"SpotPriceHistory": [entry("m5.large", "us-east-1a", "0.1", "yesterday")]}, "Timestamp 'yesterday' is not an ISO 8601 time"),
        ({"SpotPriceHistory": [{"InstanceType": "m5.large"}]}, "AvailabilityZone missing"),
    ],
)
def test_a_file_that_is_not_a_history_is_refused_naming_the_entry(tmp_path, data, problem):
    path = write(tmp_path, data)
    with pytest.raises(ConfigError, match=r"catalog\.spotPriceHistory: .*" + problem):
        parse_config(f"catalog: {{spotPriceHistory: {path}}}\npools: [{{name: a}}]\n", "provider.yaml", tmp_path)


def test_a_missing_file_is_refused_with_exit_2(tmp_path, capsys):
    config = tmp_path / "provider.yaml"
    config.write_text("catalog: {spotPriceHistory: nowhere.json}\npools: [{name: a}]\n")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "catalog.spotPriceHistory:" in err
    assert "nowhere.json" in err


def test_a_simulation_prices_spot_from_the_file_and_says_so(tmp_path):
    from nodemanager.simulator import Simulation

    path = write(tmp_path, HISTORY)
    config, catalog = parse_config(f"catalog: {{spotPriceHistory: {path}}}\npools: [{{name: a, capacityTypes: [spot]}}]\n", "provider.yaml", tmp_path)
    basis = Simulation(config, catalog, []).price_basis()
    assert basis["spot"].startswith(f"the latest price per type and zone in {path} (catalog.spotPriceHistory)")
    assert "spot prices of" in basis["catalog"]
