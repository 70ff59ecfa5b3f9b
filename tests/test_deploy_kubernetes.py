"""deploy/kubernetes and deploy/systemd: the manifests are well formed and consistent with
each other, and the RBAC rules allow exactly the calls the code makes (observed at the API
stub while a controller, a drain, leader election and the metrics reader run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from builders import binpack_pool
from kube_helpers import Kubelets, api_client, controller, kube_config, run_loops, source
from kube_stub import KubeStub

from cloud.simulated import SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.cluster.kubernetes.leader import LeaderElector
from nodemanager.config.cluster_schema import ClusterSource, LeaderElection
from nodemanager.config.load import parse_config
from nodemanager.config.schema import ProviderConfig
from nodemanager.dra.model import AllocationResult

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
API_VERSIONS = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


@pytest.fixture(autouse=True)
def _status_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Deployment sets the status token from its Secret; the ConfigMap's check needs it."""
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "t0ken-from-the-secret")


def manifests() -> list[dict]:
    docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def one(kind: str, name: str = "nodemanager", namespace: str | None = None) -> dict:
    (found,) = [
        d for d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]
    return found


def load(text: str, label: str) -> ProviderConfig:
    return parse_config(text, label, DEPLOY)[0]


def provider_yaml() -> str:
    return one("ConfigMap")["data"]["provider.yaml"]


def test_every_manifest_has_a_known_kind_and_api_version_and_a_namespace_where_needed() -> None:
    docs = manifests()
    assert {d["kind"] for d in docs} == set(API_VERSIONS)
    for doc in docs:
        assert doc["apiVersion"] == API_VERSIONS[doc["kind"]], doc["metadata"]["name"]
        namespace = doc["metadata"].get("namespace")
        if doc["kind"] in CLUSTER_SCOPED:
            assert namespace is None
        else:
            assert namespace in ("nodemanager", "kube-node-lease"), doc["metadata"]["name"]


def test_the_deployment_runs_two_replicas_of_the_configured_service() -> None:
    deployment = one("Deployment")
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]
    (mount,) = container["volumeMounts"]
    (volume,) = pod["spec"]["volumes"]
    assert volume["configMap"]["name"] == one("ConfigMap")["metadata"]["name"]
    assert container["args"] == ["run", "--config", f"{mount['mountPath']}/provider.yaml"]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    port = container["ports"][0]
    config = load(provider_yaml(), "configmap provider.yaml")
    assert config.status.listen.endswith(f":{port['containerPort']}")
    # Reachable through the Service, so a token from a Secret guards it.
    token = {"name": config.status.bearer_token_env, "valueFrom": {"secretKeyRef": {"name": "nodemanager-status", "key": "token"}}}
    assert token in container["env"]
    assert not config.status.allow_unauthenticated
    assert config.cluster.source is ClusterSource.KUBERNETES
    assert config.cluster.kubernetes is not None
    assert config.cluster.kubernetes.leader_election.enabled
    assert config.cluster.kubernetes.leader_election.namespace == "nodemanager"
    service = one("Service")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_pods_meet_the_restricted_pod_security_standard_which_the_namespace_enforces() -> None:
    labels = one("Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = one("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_budget_keeps_one_replica_and_a_policy_guards_the_status_port() -> None:
    template = one("Deployment")["spec"]["template"]
    pod_labels = template["metadata"]["labels"]
    budget = one("PodDisruptionBudget")["spec"]
    assert budget["selector"]["matchLabels"].items() <= pod_labels.items()
    assert budget["maxUnavailable"] == 1
    policy = one("NetworkPolicy", "nodemanager-status")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["policyTypes"] == ["Ingress"]
    port = template["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert [p["port"] for rule in policy["ingress"] for p in rule["ports"]] == [port]


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_the_systemd_example_loads_and_names_its_config(tmp_path: Path) -> None:
    unit = (DEPLOY / "systemd" / "nodemanager.service").read_text()
    assert "ExecStart=/opt/nodemanager/bin/nodemanager run --config /etc/nodemanager/provider.yaml" in unit
    text = (DEPLOY / "systemd" / "provider.yaml").read_text()
    assert "kubeconfig: /etc/nodemanager/kubeconfig" in text
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)  # check-config reads the kubeconfig named: one where the host has it
    config = load(text.replace("/etc/nodemanager/kubeconfig", str(tmp_path / "kubeconfig")), "deploy/systemd/provider.yaml")
    assert config.cluster.kubernetes is not None
    assert config.cluster.kubernetes.kubeconfig == str(tmp_path / "kubeconfig")
    assert config.status.listen.startswith("127.0.0.1:")


def granted() -> set[tuple[str, str, str, str]]:
    """(apiGroup, resource, verb, namespace or "*") the roles grant nodemanager's account."""
    account = one("ServiceAccount")["metadata"]
    out = set()
    for binding in [d for d in manifests() if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]:
        assert {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]} in binding["subjects"]
        role = one(binding["roleRef"]["kind"], binding["roleRef"]["name"], binding["metadata"].get("namespace"))
        scope = role["metadata"].get("namespace", "*")
        for rule in role["rules"]:
            out |= {(g, r, v, scope) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def observed_calls(stub: KubeStub, clock: VirtualClock) -> set[tuple[str, str, str, str]]:
    """Run everything that talks to the API server and collect what it asked for."""
    cloud = SimulatedCloud("test", clock, boot_delay=20)
    config = kube_config(binpack_pool())
    cluster = source(stub, cloud, clock, config)
    stub.create_pod("web", cpu="1", memory="1Gi", owner="ReplicaSet")
    made = controller(config, cloud, cluster, clock)
    kubelets = Kubelets(stub, cloud, clock)
    run_loops(made, clock, kubelets, 60)
    (node,) = made.state.nodes
    made.state.mark_for_termination(node, "test", "unhealthy")  # a drain that evicts "web"
    run_loops(made, clock, kubelets, 60)
    cluster.node_metrics()
    stub.add("resourceclaims", {"metadata": {"name": "gpu", "namespace": "default"}, "spec": {"devices": {"requests": []}}})
    assert cluster.devices() is not None
    cluster.allocate_claim("default/gpu", node, AllocationResult(()))
    LeaderElector(api_client(stub), LeaderElection(), "a", clock).tick()  # creates the lease
    LeaderElector(api_client(stub), LeaderElection(), "a", clock).tick()  # reads, then renews it
    # Discovery (/apis/<group>) is a non-resource URL every authenticated user may read
    # (the default system:discovery ClusterRole): it needs no rule here.
    return {(c.group, f"{c.resource}/{c.subresource}" if c.subresource else c.resource, c.verb, c.namespace) for c in stub.calls if c.resource}


def test_rbac_allows_exactly_the_calls_the_code_makes(stub: KubeStub, clock: VirtualClock) -> None:
    rules = granted()
    calls = observed_calls(stub, clock)

    def allowed(call: tuple[str, str, str, str]) -> tuple[str, str, str, str] | None:
        group, resource, verb, namespace = call
        for scope in ("*", namespace):
            if (group, resource, verb, scope) in rules:
                return (group, resource, verb, scope)
        return None

    assert [c for c in calls if allowed(c) is None] == []  # nothing the code does is refused
    assert rules - {allowed(c) for c in calls} == set()  # nothing granted goes unused
