"""Cases from kube-scheduler's own NodeName table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/nodename/node_name_test.go
(TestNodeName, at commit 054d429d9f8bc8de4fc82e6cf2281e12a13fe1f2), every case; the
expectations are kube's (a pod that names another node is unschedulable and unresolvable
there, with kube's reason, "node(s) didn't match the requested node name")."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import NodeName
from nodemanager.scheduling.status import Code


def _pod(node_name: str = "") -> Pod:
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [], **({"nodeName": node_name} if node_name else {})}})


CASES = [
    ("no host specified", _pod(), "", True),
    ("host matches", _pod("foo"), "foo", True),
    ("host doesn't match", _pod("bar"), "foo", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_node_name_as_kube_decides(case: tuple) -> None:
    name, pod, node_name, passes = case
    node = NodeInfo(node_name, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 10}), {})
    plugin = NodeName(FrameworkHandle())
    verdict = plugin.filter(CycleState(), pod, node)
    if passes:
        assert verdict is None, name
    else:
        assert verdict is not None, name
        assert (verdict.code, verdict.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match the requested node name"), name
    assert (plugin.pre_filter(CycleState(), pod) is None) == bool(pod.node_name)  # (nothing to check for a pod that names no node)
