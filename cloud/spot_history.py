"""Spot prices from a file of EC2's spot price history, as
``aws ec2 describe-spot-price-history --output json`` writes it: the latest Linux price of
each (instance type, zone). It prices spot where no live prices are fetched (a simulation,
or until the first refresh) more truly than a fraction of on-demand."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cloud.catalog import json_file

LINUX = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")


def latest_spot_prices(entries: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[datetime, float]]:
    """The latest Linux price of each (instance type, zone) among DescribeSpotPriceHistory's
    entries, with its time (timestamps as boto3 gives them, or as the CLI writes them)."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for entry in entries:
        if entry.get("ProductDescription", LINUX[0]) not in LINUX:
            continue
        stamp = entry["Timestamp"]
        stamp = stamp if isinstance(stamp, datetime) else datetime.fromisoformat(str(stamp))
        stamp = stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)  # (EC2's times are UTC)
        key, price = (entry["InstanceType"], entry["AvailabilityZone"]), float(entry["SpotPrice"])
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, price)
    return latest


def spot_history_file(path: Path) -> tuple[dict[tuple[str, str], float], datetime | None]:
    """The latest Linux spot price of each (instance type, zone) in the file, and the time of
    the newest; ValueError naming the entry that is not one."""
    data = json_file(path, "a spot price history")
    entries = data.get("SpotPriceHistory") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path} is not a spot price history: a JSON object with a SpotPriceHistory list (describe-spot-price-history --output json)")
    for i, entry in enumerate(entries):
        problem = _problem(entry)
        if problem:
            raise ValueError(f"{path}: SpotPriceHistory[{i}]: {problem}")
    latest = latest_spot_prices(entries)
    newest = max((stamp for stamp, _ in latest.values()), default=None)
    return {key: price for key, (_, price) in latest.items()}, newest


def _problem(entry: object) -> str:
    if not isinstance(entry, dict):
        return "not an object"
    for key in ("InstanceType", "AvailabilityZone", "SpotPrice", "Timestamp"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            return f"{key} missing (a string)"
    try:
        price = float(entry["SpotPrice"])
    except ValueError:
        return f"SpotPrice {entry['SpotPrice']!r} is not a number"
    if not math.isfinite(price) or price <= 0:
        return f"SpotPrice {entry['SpotPrice']!r} is not a price"
    try:
        datetime.fromisoformat(entry["Timestamp"])
    except ValueError:
        return f"Timestamp {entry['Timestamp']!r} is not an ISO 8601 time"
    return ""
