"""Generate the bundled instance catalog (``cloud/data/<region>.json``).

Specs come from EC2 ``DescribeInstanceTypes`` and zones from
``DescribeInstanceTypeOfferings`` (LocationType=availability-zone); on-demand prices from
a CSV (``instance_type,on_demand_usd_per_hour``) or the AWS Pricing API. Only types that
are offered in the region and have a price are kept.

    # offline, from moto's recorded EC2 data and the shared price list:
    python -m cloud.catalog_gen --moto --prices ../shared/data/ec2-on-demand-prices-us-east-1.csv
    # live, with credentials from the standard AWS chain:
    python -m cloud.catalog_gen --region us-east-1 --pricing-api
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cloud.aws.pricing import PRICING_REGION, on_demand_prices
from nodemanager.model.instance_type import eni_max_pods

DATA_DIR = Path(__file__).parent / "data"


def describe_types(ec2: Any) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for page in ec2.get_paginator("describe_instance_types").paginate():
        for record in page["InstanceTypes"]:
            out[record["InstanceType"]] = record
    return out


def describe_zones(ec2: Any) -> dict[str, list[str]]:
    zones: dict[str, set[str]] = {}
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType="availability-zone")
    for page in pages:
        for offer in page["InstanceTypeOfferings"]:
            zones.setdefault(offer["InstanceType"], set()).add(offer["Location"])
    return {k: sorted(v) for k, v in zones.items()}


def prices_from_csv(path: Path) -> dict[str, float]:
    with path.open(newline="") as handle:
        return {row["instance_type"]: float(row["on_demand_usd_per_hour"]) for row in csv.DictReader(handle)}


def catalog_entry(record: Mapping[str, Any], zones: list[str], price: float) -> dict[str, Any]:
    network = record.get("NetworkInfo", {})
    gpus = [
        {"count": g["Count"], "manufacturer": g.get("Manufacturer", ""), "model": g.get("Name", ""), "memory_mib": g.get("MemoryInfo", {}).get("SizeInMiB", 0)}
        for g in record.get("GpuInfo", {}).get("Gpus", [])
    ]
    return {
        "name": record["InstanceType"],
        "vcpu": record["VCpuInfo"]["DefaultVCpus"],
        "memory_mib": record["MemoryInfo"]["SizeInMiB"],
        "architectures": record.get("ProcessorInfo", {}).get("SupportedArchitectures", []),
        "gpus": gpus,
        "on_demand_price": price,
        "spot": "spot" in record.get("SupportedUsageClasses", []),
        "zones": zones,
        "max_pods": eni_max_pods(network.get("MaximumNetworkInterfaces", 0), network.get("Ipv4AddressesPerInterface", 0)),
        "enis": network.get("MaximumNetworkInterfaces", 0),
        "ipv4_per_eni": network.get("Ipv4AddressesPerInterface", 0),
        "burstable": bool(record.get("BurstablePerformanceSupported", False)),
        "bare_metal": bool(record.get("BareMetal", False)),
    }


def build_catalog(types: Mapping[str, Mapping[str, Any]], zones: Mapping[str, list[str]], prices: Mapping[str, float]) -> list[dict[str, Any]]:
    names = sorted(set(types) & set(zones) & {n for n, p in prices.items() if p > 0})
    return [catalog_entry(types[n], zones[n], prices[n]) for n in names]


def write_catalog(path: Path, region: str, sources: Mapping[str, str], entries: list[dict[str, Any]]) -> None:
    """One instance type per line, so a refresh reads as a reviewable diff."""
    header = {"region": region, "generated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "sources": dict(sources)}
    lines = [json.dumps(e, sort_keys=True) for e in entries]
    body = ",\n".join(lines)
    head = json.dumps(header, sort_keys=True)[:-1]
    path.write_text(f'{head}, "instance_types": [\n{body}\n]}}\n')


@contextlib.contextmanager
def _moto(region: str) -> Iterator[None]:
    from moto import mock_aws

    fake = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": region}
    saved = {k: os.environ.get(k) for k in fake}
    os.environ.update(fake)
    try:
        with mock_aws():
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--moto", action="store_true", help="answer the EC2 calls from moto's recorded data (offline)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prices", type=Path, help="CSV of instance_type,on_demand_usd_per_hour")
    source.add_argument("--pricing-api", action="store_true", help="read on-demand prices from the AWS Pricing API")
    parser.add_argument("--out", type=Path, help="default: cloud/data/<region>.json")
    args = parser.parse_args(argv)

    import boto3

    with _moto(args.region) if args.moto else contextlib.nullcontext():
        ec2 = boto3.client("ec2", region_name=args.region)
        types, zones = describe_types(ec2), describe_zones(ec2)
        if args.prices:
            prices, price_source = prices_from_csv(args.prices), f"{args.prices.name} (AWS public price list)"
        else:
            prices = on_demand_prices(boto3.client("pricing", region_name=PRICING_REGION), args.region)
            price_source = "AWS Pricing API GetProducts"
    spec_source = (
        "moto recorded DescribeInstanceTypes/DescribeInstanceTypeOfferings" if args.moto else "EC2 DescribeInstanceTypes/DescribeInstanceTypeOfferings"
    )
    entries = build_catalog(types, zones, prices)
    out = args.out or DATA_DIR / f"{args.region}.json"
    write_catalog(out, args.region, {"specs": spec_source, "prices": price_source}, entries)
    print(f"wrote {len(entries)} instance types to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
