"""Live prices: on-demand from the Pricing API, spot per zone from DescribeSpotPriceHistory.

Both are optional refinements of the bundled catalog: the controller asks every 12 hours
and keeps the last good prices when a source fails.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from cloud.spot_history import LINUX, latest_spot_prices

PRICING_REGION = "us-east-1"  # the Pricing API's home; it answers for every region
# The Pricing API names regions by their long name.
REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
}


def on_demand_prices(pricing: Any, region: str) -> dict[str, float]:
    """Linux, shared tenancy, no pre-installed software, on-demand: the list price per hour."""
    filters = [
        {"Type": "TERM_MATCH", "Field": "location", "Value": REGION_NAMES[region]},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]
    out: dict[str, float] = {}
    for page in pricing.get_paginator("get_products").paginate(ServiceCode="AmazonEC2", Filters=filters):
        for text in page["PriceList"]:
            product = json.loads(text)
            name = product.get("product", {}).get("attributes", {}).get("instanceType")
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dimension in term.get("priceDimensions", {}).values():
                    usd = float(dimension.get("pricePerUnit", {}).get("USD", 0))
                    if name and usd > 0:
                        out[name] = usd
    return out


def spot_prices(ec2: Any, since: datetime) -> dict[tuple[str, str], float]:
    """The latest Linux spot price of every (instance type, zone) since ``since``."""
    pages = ec2.get_paginator("describe_spot_price_history").paginate(ProductDescriptions=list(LINUX), StartTime=since)
    latest = latest_spot_prices(entry for page in pages for entry in page["SpotPriceHistory"])
    return {k: price for k, (_, price) in latest.items()}
