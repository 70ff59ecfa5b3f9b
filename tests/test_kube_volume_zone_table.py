"""Cases from kube-scheduler's own VolumeZone tables, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/volumezone/volume_zone_test.go
(TestSingleZone 14, TestMultiZone 5, TestWithBinding 5, at commit
030880a5dc5449403c6d1f0aa146a7dc21d6c6dc), every case, with kube's volumes, claims and
classes parsed as the API gives them. The expectations are kube's PreFilter and Filter
statuses. One message differs: kube's test class without a ``volumeBindingMode`` is
refused for that; the API server always sets one (``Immediate``), and nodemanager, reading
it so, says what kube says of an unbound claim of an ``Immediate`` class."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.model.volumes import VolumeContext, parse_claim, parse_storage_class, parse_volume
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry
from nodemanager.scheduling.status import Code

BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
CONFLICT = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had no available volume zone")
SKIP = (Code.SKIP, "")


def _context(volumes: dict[str, dict], claims: dict[str, dict], classes: tuple[dict, ...] = ()) -> VolumeContext:
    pvs = {name: parse_volume({"metadata": {"name": name, "labels": labels}, "spec": {}}, "pv") for name, labels in volumes.items()}
    pvcs = {f"default/{name}": parse_claim({"metadata": {"name": name, "namespace": "default"}, "spec": spec}, "pvc") for name, spec in claims.items()}
    scs = {(sc := parse_storage_class(doc, "sc")).name: sc for doc in classes}
    return VolumeContext(pvcs, pvs, scs)


SINGLE = _context(
    {
        "Vol_1": {BETA_ZONE: "us-west1-a"},
        "Vol_2": {BETA_REGION: "us-west1", "uselessLabel": "none"},
        "Vol_3": {BETA_REGION: "us-west1"},
        "Vol_Stable_1": {ZONE: "us-west1-a"},
        "Vol_Stable_2": {REGION: "us-west1", "uselessLabel": "none"},
        "Vol_Stable_3": {ZONE: "us-west1-a", REGION: "us-west1-a"},
    },
    {f"PVC_{n}": {"volumeName": v} for n, v in [("1", "Vol_1"), ("2", "Vol_2"), ("3", "Vol_3"), ("4", "Vol_not_exist")]}
    | {f"PVC_Stable_{n}": {"volumeName": f"Vol_Stable_{n}"} for n in "123"},
)
MULTI = _context(
    {
        "Vol_1": {BETA_ZONE: "us-west1-a"},
        "Vol_2": {BETA_ZONE: "us-west1-b", "uselessLabel": "none"},
        "Vol_3": {BETA_ZONE: "us-west1-c__us-west1-a"},
        "Vol_Stable_1": {ZONE: "us-west1-a"},
        "Vol_Stable_2": {ZONE: "us-west1-c__us-west1-a"},
    },
    {f"PVC_{n}": {"volumeName": f"Vol_{n}"} for n in "123"}
    | {"PVC_4": {"volumeName": "Vol_not_exist"}}
    | {f"PVC_Stable_{n}": {"volumeName": f"Vol_Stable_{n}"} for n in "12"},
)
BINDING = _context(
    {"Vol_1": {BETA_ZONE: "us-west1-a"}},
    {
        "PVC_1": {"volumeName": "Vol_1"},
        "PVC_NoSC": {"storageClassName": "Class_0"},
        "PVC_EmptySC": {},
        "PVC_WaitSC": {"storageClassName": "Class_Wait"},
        "PVC_ImmediateSC": {"storageClassName": "Class_Immediate"},
    },
    ({"metadata": {"name": "Class_Immediate"}}, {"metadata": {"name": "Class_Wait"}, "volumeBindingMode": "WaitForFirstConsumer"}),
)
TEST_NODE = {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}


def _pod(claim: str | None) -> Pod:
    volumes = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    return Pod.from_manifest({"metadata": {"name": "pod_1", "namespace": "default"}, "spec": {"containers": [], "volumes": volumes}})


def _refused(message: str) -> tuple[Code, str]:
    return (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


CASES = [
    # (kube's test, kube's name, volumes, claim, node labels, kube's PreFilter (None: success), kube's Filter (None: success))
    ("TestSingleZone", "pod without volume", SINGLE, None, {BETA_ZONE: "us-west1-a"}, SKIP, None),
    ("TestSingleZone", "node without labels", SINGLE, "PVC_1", {}, None, None),
    ("TestSingleZone", "beta zone label matched", SINGLE, "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("TestSingleZone", "beta region label matched", SINGLE, "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, None, None),
    ("TestSingleZone", "beta region label doesn't match", SINGLE, "PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"}, None, CONFLICT),
    ("TestSingleZone", "beta zone label doesn't match", SINGLE, "PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, None, CONFLICT),
    ("TestSingleZone", "zone label matched", SINGLE, "PVC_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("TestSingleZone", "region label matched", SINGLE, "PVC_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}, None, None),
    ("TestSingleZone", "region label doesn't match", SINGLE, "PVC_Stable_2", {REGION: "no_us-west1", "uselessLabel": "none"}, None, CONFLICT),
    ("TestSingleZone", "zone label doesn't match", SINGLE, "PVC_Stable_1", {ZONE: "no_us-west1-a", "uselessLabel": "none"}, None, CONFLICT),
    ("TestSingleZone", "pv with zone and region, node with only zone", SINGLE, "PVC_Stable_3", {ZONE: "us-west1-a"}, None, CONFLICT),
    ("TestSingleZone", "pv with zone,node with beta zone", SINGLE, "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, None, CONFLICT),
    ("TestSingleZone", "pv with beta label,node with ga label, matched", SINGLE, "PVC_1", {ZONE: "us-west1-a"}, None, None),
    ("TestSingleZone", "pv with beta label,node with ga label, don't match", SINGLE, "PVC_1", {ZONE: "us-west1-b"}, None, CONFLICT),
    ("TestMultiZone", "node without labels", MULTI, "PVC_3", {}, None, None),
    ("TestMultiZone", "beta zone label matched", MULTI, "PVC_3", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("TestMultiZone", "beta zone label doesn't match", MULTI, "PVC_1", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}, None, CONFLICT),
    ("TestMultiZone", "zone label matched", MULTI, "PVC_Stable_2", {ZONE: "us-west1-a", "uselessLabel": "none"}, None, None),
    ("TestMultiZone", "zone label doesn't match", MULTI, "PVC_Stable_1", {ZONE: "us-west1-b", "uselessLabel": "none"}, None, CONFLICT),
    ("TestWithBinding", "label zone failure domain matched", BINDING, "PVC_1", TEST_NODE, None, None),
    (
        "TestWithBinding",
        "unbound volume empty storage class",
        BINDING,
        "PVC_EmptySC",
        TEST_NODE,
        _refused("PersistentVolumeClaim had no pv name and storageClass name"),
        _refused("PersistentVolumeClaim had no pv name and storageClass name"),
    ),
    (
        "TestWithBinding",
        "unbound volume no storage class",
        BINDING,
        "PVC_NoSC",
        TEST_NODE,
        _refused('storageclasses.storage.k8s.io "Class_0" not found'),
        _refused('storageclasses.storage.k8s.io "Class_0" not found'),
    ),
    (
        "TestWithBinding",
        "unbound volume immediate binding mode",
        BINDING,
        "PVC_ImmediateSC",
        TEST_NODE,
        _refused("PersistentVolume had no name"),  # kube's test: "VolumeBindingMode not set for StorageClass" (see above)
        _refused("PersistentVolume had no name"),
    ),
    ("TestWithBinding", "unbound volume wait binding mode", BINDING, "PVC_WaitSC", TEST_NODE, SKIP, None),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_volume_zone_as_kube_decides(case: tuple) -> None:
    _, name, context, claim, labels, pre_filter, expected = case
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.volumes = context
    plugin = fw.plugins["VolumeZone"]
    pod = _pod(claim)
    state = CycleState()
    status = plugin.pre_filter(state, pod)
    assert (None if status is None else (status.code, status.message)) == pre_filter, name
    node = NodeInfo("host1", "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "pods": 10}), labels)
    verdict = plugin.filter(state, pod, node)
    assert (None if verdict is None else (verdict.code, verdict.message)) == expected, name


def test_the_scaler_boots_in_the_zone_a_bound_volumes_labels_name() -> None:
    """An older volume pinned by its zone label alone (no node affinity): the new node is
    booted in that zone, not the cheapest one."""
    from builders import binpack_pool, scaler
    from test_interpod import CATALOG3

    from nodemanager.scaler import ClusterSnapshot

    context = _context({"legacy": {ZONE: "z-c"}}, {"data": {"volumeName": "legacy"}})
    pod = Pod.from_manifest(
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}],
            },
        }
    )
    d = scaler(binpack_pool(instance_types=["*"]), catalog=CATALOG3).compute(ClusterSnapshot((pod,), (), volumes=context), 0.0)
    assert [n.zone for n in d.start] == ["z-c"]
