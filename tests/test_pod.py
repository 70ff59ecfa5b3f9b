import dataclasses
from datetime import UTC, datetime

import pytest
from kubernetes import client as k8s

from nodemanager.cluster.objects import pod_from_v1
from nodemanager.errors import InvalidInput, InvalidManifest
from nodemanager.model import CapacityPolicy, Operator, Pod, PodPhase, Resources, Taint, TaintEffect, Toleration
from nodemanager.model.interpod import NO_AFFINITY, SpreadConstraint, WhenUnsatisfiable
from nodemanager.model.labels import ZONE
from nodemanager.model.pod import effective_request
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY
from nodemanager.model.selectors import Requirement, SelectorTerm
from nodemanager.scheduling.nodeinfo import nonzero_request

MANIFEST = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "uid": "4f0c6c9e-1",
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"app": "web", "nodemanager.io/pod-group": "g1"},
        "annotations": {
            "nodemanager.io/instance-type": "c5*",
            "nodemanager.io/capacity-type": "spot",
            "nodemanager.io/zone": "us-east-1b",
            "nodemanager.io/pod-group-min-member": "3",
        },
    },
    "spec": {
        "schedulerName": "nodemanager",
        "priority": 1000,
        "nodeSelector": {"workload": "general"},
        "containers": [
            {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
            {"name": "log", "image": "fluent", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}},
        ],
        "initContainers": [{"name": "migrate", "image": "m", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
        "overhead": {"cpu": "10m"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}, {"operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
                        {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["5"]}, {"key": "legacy", "operator": "DoesNotExist"}]},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 40, "preference": {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}}
                ],
            }
        },
    },
    "status": {"phase": "Pending"},
}


def v1_equivalent() -> k8s.V1Pod:
    """The same pod, built with the official client's model classes."""
    req = k8s.V1NodeSelectorRequirement
    return k8s.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=k8s.V1ObjectMeta(
            name="web-1",
            namespace="shop",
            uid="4f0c6c9e-1",
            creation_timestamp=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            labels={"app": "web", "nodemanager.io/pod-group": "g1"},
            annotations=MANIFEST["metadata"]["annotations"],
        ),
        spec=k8s.V1PodSpec(
            scheduler_name="nodemanager",
            priority=1000,
            node_selector={"workload": "general"},
            containers=[
                k8s.V1Container(name="app", image="nginx", resources=k8s.V1ResourceRequirements(requests={"cpu": "500m", "memory": "256Mi"})),
                k8s.V1Container(name="log", image="fluent", resources=k8s.V1ResourceRequirements(limits={"cpu": "100m", "memory": "64Mi"})),
            ],
            init_containers=[k8s.V1Container(name="migrate", image="m", resources=k8s.V1ResourceRequirements(requests={"cpu": "2", "memory": "64Mi"}))],
            overhead={"cpu": "10m"},
            tolerations=[k8s.V1Toleration(key="dedicated", operator="Equal", value="web", effect="NoSchedule"), k8s.V1Toleration(operator="Exists")],
            affinity=k8s.V1Affinity(
                node_affinity=k8s.V1NodeAffinity(
                    required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                        node_selector_terms=[
                            k8s.V1NodeSelectorTerm(match_expressions=[req(key="kubernetes.io/arch", operator="In", values=["amd64"])]),
                            k8s.V1NodeSelectorTerm(match_expressions=[req(key="gen", operator="Gt", values=["5"]), req(key="legacy", operator="DoesNotExist")]),
                        ]
                    ),
                    preferred_during_scheduling_ignored_during_execution=[
                        k8s.V1PreferredSchedulingTerm(
                            weight=40,
                            preference=k8s.V1NodeSelectorTerm(match_expressions=[req(key="karpenter.sh/capacity-type", operator="In", values=["spot"])]),
                        )
                    ],
                )
            ),
        ),
        status=k8s.V1PodStatus(phase="Pending"),
    )


def test_manifest_is_parsed_completely():
    pod = Pod.from_manifest(MANIFEST)
    assert pod.key == "shop/web-1"
    # containers 600m/320Mi, init 2/64Mi dominates cpu; plus 10m overhead
    assert pod.requests == Resources.parse({"cpu": "2010m", "memory": "320Mi"})
    assert pod.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    assert (pod.instance_type, pod.capacity_policy, pod.zone) == ("c5*", CapacityPolicy.SPOT, "us-east-1b")
    assert (pod.pod_group, pod.pod_group_min_member) == ("g1", 3)
    assert pod.scheduler_name == "nodemanager"
    assert pod.priority == 1000
    assert pod.phase is PodPhase.PENDING
    assert pod.tolerations[0] == Toleration("dedicated", "Equal", "web", TaintEffect.NO_SCHEDULE)
    assert pod.tolerations[1].tolerates(Taint("anything", TaintEffect.NO_EXECUTE))
    assert [r.operator for r in pod.affinity[1].requirements] == [Operator.GT, Operator.DOES_NOT_EXIST]
    assert pod.preferred_affinity == ((40, SelectorTerm((Requirement("karpenter.sh/capacity-type", Operator.IN, ("spot",)),))),)


def test_v1pod_and_manifest_give_the_same_pod():
    assert pod_from_v1(v1_equivalent()) == Pod.from_manifest(MANIFEST)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [{"resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "1"}}}]}, {"cpu": "2"}, id="sum-of-containers"
        ),
        pytest.param(
            {"containers": [{"resources": {"requests": {"cpu": "1"}}}], "initContainers": [{"resources": {"requests": {"cpu": "3"}}}]},
            {"cpu": "3"},
            id="init-dominates",
        ),
        pytest.param(
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                    {"resources": {"requests": {"cpu": "2"}}},
                ],
            },
            {"cpu": "2500m"},
            id="sidecar-runs-beside-later-init",
        ),
        pytest.param(
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}],
            },
            {"cpu": "1500m"},
            id="sidecar-adds-to-containers",
        ),
        pytest.param({"containers": [{"resources": {"limits": {"memory": "1Gi"}}}]}, {"memory": "1Gi"}, id="limit-defaults-request"),
        pytest.param({"containers": [{"name": "x"}], "overhead": {"memory": "64Mi"}}, {"memory": "64Mi"}, id="overhead-only"),
        pytest.param(
            {"resources": {"requests": {"cpu": "3"}}, "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}], "overhead": {"cpu": "100m"}},
            {"cpu": "3100m", "memory": "1Gi"},
            id="pod-level-request-stands-for-the-containers-then-overhead",
        ),
        pytest.param(
            {"resources": {"limits": {"cpu": "4", "memory": "2Gi"}}, "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
            {"cpu": "1", "memory": "2Gi"},
            id="pod-level-limit-stands-in-only-where-no-container-asks",
        ),
        pytest.param(
            {"resources": {"requests": {"hugepages-2Mi": "8Mi"}}, "containers": [{"resources": {"requests": {"hugepages-2Mi": "4Mi", "cpu": "1"}}}]},
            {"cpu": "1", "hugepages-2Mi": "8Mi"},
            id="pod-level-hugepages",
        ),
    ],
)
def test_effective_request_as_kubernetes_computes_it(spec, expected):
    assert effective_request(spec) == Resources.parse(expected)


MI = 2**20


@pytest.mark.parametrize(
    ("spec", "scored"),
    [
        pytest.param({"containers": []}, (0, 0), id="no-containers-ask-nothing"),
        pytest.param({"containers": [{"name": "c"}]}, (100, 200 * MI), id="a-container-missing-both"),
        pytest.param({"containers": [{"resources": {"requests": {"cpu": "3", "memory": "0"}}}]}, (3000, 0), id="explicit-zero-stays"),
        pytest.param({"containers": [{"resources": {"requests": {"cpu": "1"}}}, {"name": "b"}]}, (1100, 400 * MI), id="per-container"),
        pytest.param(
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"resources": {"requests": {"memory": "1Gi"}}}, {"restartPolicy": "Always", "name": "side"}],
            },
            (1100, 1024 * MI),  # cpu: 1 + the sidecar's 100m; memory: the init container's 1Gi
            id="init-max-and-sidecar-sum",
        ),
        pytest.param({"containers": [{"resources": {"limits": {"memory": "1Gi"}}}], "overhead": {"cpu": "50m"}}, (150, 1024 * MI), id="limit-and-overhead"),
    ],
)
def test_the_scores_count_kubes_default_for_each_containers_missing_request(spec, scored):
    """kube-scheduler's scores count 100m and 200Mi for a container whose cpu or memory request
    is missing (after the API server defaults it to the limit); an explicit 0 stays 0, a pod
    without containers asks for nothing (``NonMissingContainerRequests``)."""
    pod = Pod.from_manifest({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})
    assert pod.scored == scored
    assert nonzero_request(pod) == scored


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"metadata": {"name": ""}}, "pod.metadata.name"),
        ({"spec": {"containers": [{"resources": {"requests": {"cpu": "fast"}}}]}}, "pod.spec.containers[0].resources.requests.cpu"),
        ({"spec": {"containers": "nope"}}, "pod.spec.containers"),
        ({"spec": {"initContainers": [{"resources": {"limits": {"memory": "-1Gi"}}}]}}, "pod.spec.initContainers[0].resources.requests.memory"),
        ({"spec": {"tolerations": [{"operator": "Maybe"}]}}, "pod.spec.tolerations[0].operator"),
        ({"spec": {"priority": "high"}}, "pod.spec.priority"),
        ({"status": {"phase": "Sleeping"}}, "pod.status.phase"),
        ({"metadata": {"name": "p", "annotations": {"nodemanager.io/capacity-type": "cheap"}}}, "pod.metadata.annotations[nodemanager.io/capacity-type]"),
        (
            {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1", "2"]}]}]
                            }
                        }
                    }
                }
            },
            "pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        ({"metadata": {"name": "p", "creationTimestamp": "yesterday"}}, "pod.metadata.creationTimestamp"),
        (
            {"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}}},
            "pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        (
            {"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "preference": {}}]}}}},
            "pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        (
            {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}}
                            ]
                        }
                    }
                }
            },
            "pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator",
        ),
    ],
)
def test_bad_manifests_name_the_field(patch, field):
    doc = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    for key, value in patch.items():
        doc[key] = {**doc.get(key, {}), **value}
    with pytest.raises(InvalidInput) as err:
        Pod.from_manifest(doc)
    assert str(err.value).startswith(field)


def test_defaults_for_a_bare_pod():
    pod = Pod.from_manifest({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    assert (pod.namespace, pod.uid, pod.phase, pod.capacity_policy, pod.scheduler_name) == (
        "default",
        "default/p",
        PodPhase.PENDING,
        CapacityPolicy.ANY,
        "default-scheduler",
    )
    assert pod.requests == Resources()


def test_invalid_manifest_is_a_value_error_with_path():
    with pytest.raises(InvalidManifest) as err:
        Pod.from_manifest("not a pod", "workload.pods[3].pod")
    assert err.value.field == "workload.pods[3].pod"


def test_a_pod_knows_whether_it_asks_for_batch_capacity_whatever_made_it() -> None:
    batch = Pod("default", "b", "u", Resources({BATCH_CPU: 500, BATCH_MEMORY: 2**30}))
    assert batch.batch
    assert not Pod("default", "r", "u", Resources({"cpu": 500})).batch
    assert not dataclasses.replace(batch, requests=Resources({"cpu": 500})).batch  # made again with the pod
    assert dataclasses.replace(batch, node_name="n1").batch


def test_a_pods_life_copies_it_as_replace_would_and_nothing_else() -> None:
    """``living`` (slot by slot, for speed) gives what ``dataclasses.replace`` gives, derived
    fields and a kind already made included; it refuses a field the derived ones are made from."""
    batch = Pod.from_manifest(MANIFEST)
    _ = batch.kind  # made once, then carried
    for changes in ({"node_name": "n1", "phase": PodPhase.RUNNING}, {"phase": PodPhase.SUCCEEDED}, {"created_at": 7.0}, {}):
        copy = batch.living(**changes)
        assert copy == dataclasses.replace(batch, **changes)
        assert (copy.key, copy.of_node, copy.batch, copy.kind) == (batch.key, batch.of_node, batch.batch, batch.kind)
        assert copy is not batch
    assert batch.node_name == ""  # the original is untouched
    for refused in ({"name": "other"}, {"requests": Resources()}, {"daemon_set": "ns/ds"}):
        with pytest.raises(TypeError, match="living changes only"):
            batch.living(**refused)


def test_a_pods_constraints_copy_it_as_replace_would_and_nothing_else() -> None:
    """``constrained`` (what planners pin and relax) gives what ``dataclasses.replace`` gives;
    it refuses a field a derived one is made from (labels make the kind, requests ``batch``)."""
    pod = Pod.from_manifest(MANIFEST)
    _ = pod.kind
    spread = (SpreadConstraint(1, ZONE, WhenUnsatisfiable.DO_NOT_SCHEDULE, None),)
    for changes in ({"node_selector": {ZONE: "us-east-1a"}, "spread": ()}, {"pod_affinity": NO_AFFINITY}, {"spread": spread}, {}):
        copy = pod.constrained(**changes)
        assert copy == dataclasses.replace(pod, **changes)
        assert (copy.key, copy.of_node, copy.batch, copy.kind) == (pod.key, pod.of_node, pod.batch, pod.kind)
    for refused in ({"labels": {"app": "b"}}, {"requests": Resources()}, {"node_name": "n1"}):
        with pytest.raises(TypeError, match="constrained changes only"):
            pod.constrained(**refused)


@pytest.mark.parametrize(
    ("annotations", "kept"),
    [
        ({"nodemanager.io/do-not-disrupt": "true"}, True),
        ({"karpenter.sh/do-not-disrupt": "true"}, True),
        ({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, True),
        ({"cluster-autoscaler.kubernetes.io/safe-to-evict": "False"}, True),
        ({"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, False),
        ({"karpenter.sh/do-not-disrupt": "false"}, False),
        ({}, False),
    ],
)
def test_the_do_not_disrupt_annotations_of_karpenter_and_the_cluster_autoscaler_keep_a_pods_node(annotations, kept):
    doc = {"metadata": {"name": "p", "namespace": "default", "annotations": annotations}, "spec": {"containers": [{"name": "c"}]}}
    assert Pod.from_manifest(doc).do_not_disrupt is kept


@pytest.mark.parametrize(
    "annotation",
    [("nodemanager.io/do-not-disrupt", "true"), ("karpenter.sh/do-not-disrupt", "true"), ("cluster-autoscaler.kubernetes.io/scale-down-disabled", "true")],
)
def test_a_node_annotated_by_any_of_the_three_is_kept(annotation):
    from nodemanager.cluster.kubernetes.convert import node_from_api

    doc = {"metadata": {"name": "n", "annotations": dict([annotation])}, "spec": {}, "status": {}}
    assert node_from_api(doc, "n", None).do_not_disrupt
    assert not node_from_api({"metadata": {"name": "n"}, "spec": {}, "status": {}}, "n", None).do_not_disrupt


def test_pod_level_requests_replace_the_scoring_defaults_too() -> None:
    """kube's scores apply the pod-level request after the containers' defaults: a pod of
    one container with no requests and a pod-level cpu of 2 scores as 2 cpu, 200Mi memory."""
    spec = {"resources": {"requests": {"cpu": "2"}}, "containers": [{"name": "c"}]}
    pod = Pod.from_manifest({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})
    assert nonzero_request(pod) == (2000, 200 * 1024 * 1024)


@pytest.mark.parametrize("kind", ["requests", "limits"])
def test_a_pod_level_resource_the_api_server_refuses_is_refused_with_its_path(kind: str) -> None:
    spec = {"resources": {kind: {"nvidia.com/gpu": "1"}}, "containers": [{"name": "c"}]}
    with pytest.raises(InvalidManifest) as refused:
        Pod.from_manifest({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})
    assert refused.value.field == f"pod.spec.resources.{kind}.nvidia.com/gpu"


def test_a_pod_level_request_below_its_containers_is_refused_as_the_api_server_refuses_it() -> None:
    spec = {"resources": {"requests": {"cpu": "750m"}}, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    with pytest.raises(InvalidManifest) as refused:
        Pod.from_manifest({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})
    assert refused.value.field == "pod.spec.resources.requests.cpu"
    assert "750m" in str(refused.value)


def test_a_pod_from_the_api_with_pod_level_resources_asks_for_them() -> None:
    v1 = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="p", namespace="d"),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c")], resources=k8s.V1ResourceRequirements(requests={"cpu": "2", "memory": "4Gi"})),
    )
    assert pod_from_v1(v1).requests == Resources.parse({"cpu": "2", "memory": "4Gi"})


def test_the_scaler_boots_a_node_that_holds_a_pods_pod_level_request() -> None:
    """Containers that ask for nothing, a pod that asks for 6 cpu: an 8-vCPU node, not the
    cheapest one."""
    from builders import binpack_pool, scaler
    from test_interpod import CATALOG3

    from nodemanager.scaler import ClusterSnapshot

    spec = {"resources": {"requests": {"cpu": "6", "memory": "1Gi"}}, "containers": [{"name": "c"}]}
    pod = Pod.from_manifest({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})
    d = scaler(binpack_pool(instance_types=["*"]), catalog=CATALOG3).compute(ClusterSnapshot((pod,), ()), 0.0)
    assert [n.instance_type for n in d.start] == ["s.2xlarge"]
