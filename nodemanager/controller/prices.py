"""The price controller (``loops.prices``, 12 h, as Karpenter's): fresher prices from the
cloud, where it has them (the AWS Pricing API and spot price history); the last good ones
otherwise, with the configured price overrides applied again. The cloud is called outside
the controller's lock; the new catalog is handed to provisioning under it, which decides
again with it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cloud.errors import CloudError
from nodemanager.config.prices import overridden

if TYPE_CHECKING:
    from collections.abc import Callable

    from cloud.base import CloudClient
    from cloud.catalog import Catalog
    from nodemanager.controller.state import ClusterState

log = logging.getLogger("nodemanager.controller")


class PriceRefresher:
    def __init__(self, state: ClusterState, cloud: CloudClient, reprice: Callable[[Catalog], None]) -> None:
        self.state = state
        self.cloud = cloud
        self.reprice = reprice  # plan with fresher prices from now on (the operator swaps the scaler)

    def run(self) -> None:
        c = self.state
        try:
            update = self.cloud.fetch_prices()  # network: outside the lock
        except CloudError as exc:
            log.warning("price refresh failed; keeping prices from %s: %s", c.catalog.source, exc)
            return
        if update is None or not (update.on_demand or update.spot):
            return
        stamp = c.clock.now()
        with c.lock:
            fresh = c.catalog.listed.with_prices(update.on_demand, update.spot, f"{c.catalog.region} prices refreshed at {stamp:.0f}")
            self.reprice(overridden(fresh, c.config.catalog.price_overrides))  # list prices in, what this account pays out
        log.info("prices refreshed: %d on-demand, %d spot (per zone)", len(update.on_demand), len(update.spot))
