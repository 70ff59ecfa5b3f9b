"""Building the service's parts from a provider.yaml: the one place that knows which
implementation each ``cloud.provider`` and ``cluster.source`` means."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from cloud.base import CloudClient
from cloud.catalog import Catalog
from cloud.simulated import SimulatedCloud
from nodemanager.clock import Clock
from nodemanager.cluster.arrivals import Arrival
from nodemanager.cluster.base import ClusterSource
from nodemanager.cluster.simulated import SimulatedCluster
from nodemanager.cluster.workload import ClusterObjects, load_workload_file
from nodemanager.config import cloud_schema, cluster_schema
from nodemanager.config.cloud_schema import CloudProvider
from nodemanager.config.schema import ProviderConfig
from nodemanager.controller.node_controller import NodeController
from nodemanager.dra.context import DeviceContext
from nodemanager.errors import ConfigError
from nodemanager.model.reservation import Reservation
from nodemanager.status.metrics import Metrics

if TYPE_CHECKING:
    from nodemanager.cluster.kubernetes.reachability import Reachability


def simulated_cloud(config: ProviderConfig, clock: Clock, reservations: Sequence[tuple[Reservation, float]] = ()) -> SimulatedCloud:
    """The in-memory cloud with the file's ``cloud.simulated`` settings (or their defaults),
    holding the capacity ``reservations`` a workload declares (each with its start)."""
    sim = config.cloud.simulated or cloud_schema.SimulatedCloud()
    return SimulatedCloud(
        config.controller_id or "simulated",
        clock,
        boot_delay=sim.boot_delay,
        seed=sim.seed,
        capacity=sim.capacity,
        throttle_rate=sim.throttle_rate,
        death_per_hour=sim.instance_death_per_hour,
        spot_interruption_per_hour=sim.spot_interruption_per_hour,
        image=next(iter(config.nodes.boot_image_spec.image_ids), "ami-simulated"),
        reservations=reservations,
    )


def build_cloud(config: ProviderConfig, clock: Clock, catalog: Catalog, stop: threading.Event | None = None) -> CloudClient:
    if config.cloud.provider is CloudProvider.SIMULATED:
        return simulated_cloud(config, clock)
    if config.cloud.aws is None:  # the schema requires the block; this keeps the types honest
        raise ConfigError("the configuration", ["cloud.aws: required with cloud.provider aws"])
    from cloud.aws.client import AwsCloud  # boto3 is imported only when EC2 is used

    return AwsCloud(config.cloud.aws.for_cloud(), config.controller_id or "", catalog, clock, boot_image=config.nodes.boot_image_spec.for_cloud(), stop=stop)


def build_cluster(
    config: ProviderConfig,
    clock: Clock,
    cloud: CloudClient,
    workload: Sequence[Arrival] | None = None,
    *,
    identity: str = "nodemanager",
    reachability: Reachability | None = None,
) -> ClusterSource:
    if config.cluster.source is cluster_schema.ClusterSource.KUBERNETES:
        from nodemanager.cluster.kubernetes.connect import api_client
        from nodemanager.cluster.kubernetes.source import KubernetesCluster

        settings = config.cluster.kubernetes or cluster_schema.KubernetesCluster()
        api = api_client(settings, reachability.errors if reachability is not None else None)
        return KubernetesCluster(api, cloud, clock, settings, identity=identity, reachability=reachability)
    sim = config.cluster.simulated or cluster_schema.SimulatedCluster()
    loaded = load_workload_file(sim.workload) if sim.workload else None
    arrivals = workload if workload is not None else (loaded.arrivals if loaded else [])
    return simulated_cluster(config, clock, cloud, arrivals, devices=loaded.devices if loaded else None, objects=loaded.objects if loaded else None)


def simulated_cluster(
    config: ProviderConfig,
    clock: Clock,
    cloud: CloudClient,
    arrivals: Sequence[Arrival],
    *,
    devices: DeviceContext | None = None,
    objects: ClusterObjects | None = None,
) -> SimulatedCluster:
    """The in-memory cluster with the file's ``cluster.simulated`` settings (or their defaults)."""
    sim = config.cluster.simulated or cluster_schema.SimulatedCluster()
    return SimulatedCluster(
        clock,
        cloud,
        arrivals,
        register_delay=sim.register_delay,
        system_usage=(sim.system_cpu, sim.system_memory),
        devices=devices,
        objects=objects,
        resume_evicted=sim.evicted_pods == "resume",
    )


def build_controller(
    config: ProviderConfig,
    catalog: Catalog,
    clock: Clock,
    *,
    cloud: CloudClient | None = None,
    cluster: ClusterSource | None = None,
    workload: Sequence[Arrival] | None = None,
    executor: Executor | None = None,
    metrics: Metrics | None = None,
    stop: threading.Event | None = None,
) -> NodeController:
    cloud = cloud or build_cloud(config, clock, catalog, stop)
    cluster = cluster or build_cluster(config, clock, cloud, workload)
    return NodeController(config, catalog, cloud, cluster, clock, executor=executor, metrics=metrics)
