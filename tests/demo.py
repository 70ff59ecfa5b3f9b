"""The embedded demo configuration run for a while in virtual time: what the status views
and the metrics are shown on."""

from __future__ import annotations

from pathlib import Path

from nodemanager.clock import VirtualClock
from nodemanager.config import load_config
from nodemanager.controller import InlineExecutor, NodeController
from nodemanager.controller.virtual import VirtualDriver
from nodemanager.status.metrics import Metrics
from nodemanager.wiring import build_cloud, build_cluster

PROVIDER = Path(__file__).resolve().parent.parent / "config" / "provider.yaml"


def demo_controller(seconds: float, *, start: float = 0.0, metrics: Metrics | None = None) -> NodeController:
    """The demo's controller after ``seconds``: nodes booted, pods bound, idle ones stopping."""
    config, catalog = load_config(str(PROVIDER))
    clock = VirtualClock(start)
    cloud = build_cloud(config, clock, catalog)
    controller = NodeController(config, catalog, cloud, build_cluster(config, clock, cloud), clock, executor=InlineExecutor(), metrics=metrics)
    controller.recover()
    VirtualDriver(controller, clock, config.loops.intervals()).run_for(seconds)
    return controller
