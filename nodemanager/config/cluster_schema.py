"""provider.yaml's ``cluster`` block: the simulated cluster, or a Kubernetes API server
(scheduler or provisioner mode, leader election)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from nodemanager.config.blocks import ByteQuantity, CpuQuantity, Model, only_chosen_block
from nodemanager.config.durations import Duration

# --- cluster ----------------------------------------------------------------------------


class SimulatedCluster(Model):
    """A cluster in memory that registers booted instances as nodes and plays a workload."""

    workload: str | None = None
    """Workload file, relative to the configuration file; none: no pods."""
    register_delay: Duration = 10.0
    """Running instance to Ready node."""
    system_cpu: CpuQuantity = 200
    """CPU each simulated node's system daemons use (counted by the batch tier)."""
    system_memory: ByteQuantity = 512 * 2**20
    """Memory each simulated node's system daemons use."""
    evicted_pods: Literal["restart", "resume"] = "restart"
    """A pod whose node goes (consolidation, expiry, failure) runs its whole `duration` again (`restart`, as a Job's pod does) or what it had left
    (`resume`)."""


class LeaderElection(Model):
    enabled: bool = True
    """Run only while holding the Lease, so two replicas never act at once."""
    namespace: str = "nodemanager"
    """Namespace of the Lease."""
    lease_name: str = "nodemanager"
    """Name of the Lease."""
    lease_duration: Duration = 15.0
    """How long a Lease lasts unrenewed (client-go's default)."""
    renew_deadline: Duration = 10.0
    """A leader that could not renew within this long stops acting. Needs `retryPeriod` < `renewDeadline` < `leaseDuration`."""
    retry_period: Duration = 2.0
    """How often a candidate tries to take or renew the Lease."""

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        # A leader must stop acting (renewDeadline) before its lease can run out for others.
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"need 0 < retryPeriod ({self.retry_period:g}s) < renewDeadline ({self.renew_deadline:g}s) < leaseDuration ({self.lease_duration:g}s)"
            )
        return self


class KubernetesMode(StrEnum):
    SCHEDULER = "scheduler"  # nodemanager binds the pods whose schedulerName is ours
    PROVISIONER = "provisioner"  # the default scheduler binds; we add capacity for its unschedulable pods


class KubernetesCluster(Model):
    mode: KubernetesMode = KubernetesMode.PROVISIONER
    """`provisioner`: kube-scheduler binds every pod and nodemanager boots what the pods it could not place need (as Karpenter and the Cluster Autoscaler
    do, so their users' workloads run unchanged). `scheduler`: nodemanager binds the pods whose `schedulerName` is `schedulerName`."""
    scheduler_name: str = "nodemanager"
    """The `schedulerName` of the pods nodemanager binds in `scheduler` mode."""
    kubeconfig: str | None = None
    """Path of a kubeconfig; none: the in-cluster service account, then the default kubeconfig."""
    context: str | None = None
    """The kubeconfig context to use; none: its current context."""
    drain_timeout: Duration = 300.0
    """How long a node's pods may take to leave before the node is terminated anyway (a voluntary disruption waits instead)."""
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    """Leader election through a coordination.k8s.io Lease."""


class ClusterSource(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


class Cluster(Model):
    source: ClusterSource = ClusterSource.SIMULATED
    """`simulated` or `kubernetes`: where pods and nodes come from."""
    simulated: SimulatedCluster | None = None
    """Settings of the simulated cluster."""
    kubernetes: KubernetesCluster | None = None
    """Settings for a real Kubernetes cluster."""

    @property
    def drain_timeout(self) -> float:
        """How long a node's pods may take to leave before it is terminated anyway."""
        return self.kubernetes.drain_timeout if self.kubernetes else KubernetesCluster.model_fields["drain_timeout"].default

    @model_validator(mode="after")
    def _one_block(self) -> Cluster:
        only_chosen_block(self, "source", {ClusterSource.SIMULATED: SimulatedCluster, ClusterSource.KUBERNETES: KubernetesCluster})
        return self
