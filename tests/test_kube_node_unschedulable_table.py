"""Cases from kube-scheduler's own NodeUnschedulable table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable_test.go
(TestNodeUnschedulable, at commit 00a12c787cb55fa704576e899983e62d2a3d2dc6), every case; the
expectations are kube's (a cordoned node is unschedulable and unresolvable, with kube's
reason, "node(s) were unschedulable")."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import NodeUnschedulable
from nodemanager.scheduling.status import Code


def _pod(*tolerations: dict) -> Pod:
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [], "tolerations": list(tolerations)}})


CASES = [
    ("Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)", _pod(), True, False),
    ("Schedule pod to normal node", _pod(), False, True),
    (
        "Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
        _pod({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}),
        True,
        True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_node_unschedulable_as_kube_decides(case: tuple) -> None:
    name, pod, cordoned, passes = case
    node = NodeInfo("n", "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 10}), {}, unschedulable=cordoned)
    verdict = NodeUnschedulable(FrameworkHandle()).filter(CycleState(), pod, node)
    if passes:
        assert verdict is None, name
    else:
        assert verdict is not None, name
        assert (verdict.code, verdict.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were unschedulable"), name
