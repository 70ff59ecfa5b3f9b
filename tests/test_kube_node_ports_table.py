"""Cases from kube-scheduler's own NodePorts tables, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/nodeports/node_ports_test.go (TestNodePorts
and TestFits, at commit 008b3652959ca58af8be3fb5b6ecfe9ae7638282), every case. A port is
written as kube's test writes it, ``protocol/hostIP/hostPort``. The expectations are kube's:
a pod with no host port is skipped at PreFilter (so is one whose only host port is an
ordinary init container's), a sidecar's port counts."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import NodePorts
from nodemanager.scheduling.status import Code

REASON = "node(s) didn't have free ports for the requested pod ports"


def _ports(*infos: str) -> list[dict]:
    out = []
    for info in infos:
        protocol, ip, port = info.split("/")
        out.append({"containerPort": int(port), "hostPort": int(port), "hostIP": ip, "protocol": protocol})
    return out


def _pod(name: str, *infos: str, node: str = "", init: str = "") -> Pod:
    """A pod whose container asks for the ports ``infos``; with ``init`` ("sidecar" or
    "init"), an init container asks for them instead."""
    spec: dict = {"containers": [{"name": "c", **({"ports": _ports(*infos)} if not init else {})}]}
    if init:
        spec["initContainers"] = [{"name": "i", "ports": _ports(*infos), **({"restartPolicy": "Always"} if init == "sidecar" else {})}]
    if node:
        spec["nodeName"] = node
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def _node(*infos: str) -> NodeInfo:
    made = NodeInfo("m1", "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 10}), {})
    made.add_pod(_pod("p1", *infos, node="m1"))
    return made


CASES = [
    # (kube's name, pod, the node's pod's ports, kube's PreFilter: skip, kube's Filter: passes)
    ("skip filter", _pod("p"), (), True, True),
    ("other port", _pod("p", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/9090",), False, True),
    ("same udp port", _pod("p", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), False, False),
    ("same tcp port", _pod("p", "TCP/127.0.0.1/8080"), ("TCP/127.0.0.1/8080",), False, False),
    ("different host ip", _pod("p", "TCP/127.0.0.1/8080"), ("TCP/127.0.0.2/8080",), False, True),
    ("different protocol", _pod("p", "UDP/127.0.0.1/8080"), ("TCP/127.0.0.1/8080",), False, True),
    ("second udp port conflict", _pod("p", "UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), False, False),
    ("first tcp port conflict", _pod("p", "TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"), ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"), False, False),
    ("first tcp port conflict due to 0.0.0.0 hostIP", _pod("p", "TCP/0.0.0.0/8001"), ("TCP/127.0.0.1/8001",), False, False),
    ("TCP hostPort conflict due to 0.0.0.0 hostIP", _pod("p", "TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), ("TCP/127.0.0.1/8001",), False, False),
    ("second tcp port conflict to 0.0.0.0 hostIP", _pod("p", "TCP/127.0.0.1/8001"), ("TCP/0.0.0.0/8001",), False, False),
    ("second different protocol", _pod("p", "UDP/127.0.0.1/8001"), ("TCP/0.0.0.0/8001",), False, True),
    ("UDP hostPort conflict due to 0.0.0.0 hostIP", _pod("p", "UDP/127.0.0.1/8001"), ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"), False, False),
    ("non-sidecar initContainer using hostPort", _pod("p", "TCP/0.0.0.0/8001", init="init"), ("TCP/0.0.0.0/8001",), True, True),
    ("TCP hostPort conflict from sidecar initContainer", _pod("p", "TCP/0.0.0.0/8001", init="sidecar"), ("TCP/0.0.0.0/8001",), False, False),
    # TestFits
    ("non-conflicting ports", _pod("p", "TCP/127.0.0.1/80"), ("TCP/127.0.0.1/9090",), False, True),
    (
        "multiple non-conflicting ports",
        _pod("p", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
        ("TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"),
        False,
        True,
    ),
    ("same ports on different protocols", _pod("p", "TCP/127.0.0.1/80"), ("UDP/127.0.0.1/80",), False, True),
    ("conflicting ports", _pod("p", "TCP/127.0.0.1/80"), ("TCP/127.0.0.1/80",), False, False),
    (
        "multiple ports, some conflicting",
        _pod("p", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
        ("TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"),
        False,
        False,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_node_ports_as_kube_decides(case: tuple) -> None:
    name, pod, taken, skipped, passes = case
    plugin = NodePorts(FrameworkHandle())
    status = plugin.pre_filter(CycleState(), pod)
    if skipped:
        assert status is not None, name
        assert status.code is Code.SKIP, name
        return
    assert status is None, name
    verdict = plugin.filter(CycleState(), pod, _node(*taken))
    if passes:
        assert verdict is None, name
    else:
        assert verdict is not None, name
        assert (verdict.code, verdict.message) == (Code.UNSCHEDULABLE, REASON), name
