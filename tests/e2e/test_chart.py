"""The Helm chart: linted and rendered with its default and example values, the plain
manifests of deploy/kubernetes exactly what it renders, and what it renders admitted by a
real API server."""

from __future__ import annotations

import copy
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from controlplane import ControlPlane, binaries
from kubernetes import client, utils
from world import api_client

from nodemanager.config import parse_config

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "nodemanager"
EXAMPLE = REPO / "deploy" / "helm" / "examples" / "production.yaml"
CRDS = {"ServiceMonitor", "PrometheusRule"}  # the Prometheus Operator's: not on a bare API server
pytestmark = pytest.mark.e2e

sys.path.insert(0, str(REPO / "deploy" / "helm"))
import render  # noqa: E402


@pytest.fixture(scope="module")
def helm() -> str:
    return str(binaries()["helm"])


def template(helm: str, *args: str, namespace: str = "nodemanager", release: str = "nodemanager") -> list[dict]:
    done = subprocess.run([helm, "template", release, str(CHART), "--namespace", namespace, *args], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def one(docs: list[dict], kind: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


@pytest.mark.parametrize(
    "values", [[], ["-f", str(EXAMPLE)], ["-f", str(REPO / "deploy" / "helm" / "plain-values.yaml")]], ids=["default", "production", "plain"]
)
def test_the_chart_lints(helm: str, values: list[str]) -> None:
    done = subprocess.run([helm, "lint", "--strict", str(CHART), *values], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_deploy_kubernetes_is_what_the_chart_renders(helm: str, tmp_path: Path) -> None:
    """The plain manifests are the chart's output, not a copy kept by hand: `make manifests`
    writes them again after a change to the chart."""
    render.render(helm, tmp_path)
    rendered = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.yaml"))
    shipped = sorted(p.relative_to(REPO / "deploy" / "kubernetes") for p in (REPO / "deploy" / "kubernetes").rglob("*.yaml"))
    assert rendered == shipped
    for name in rendered:
        assert (tmp_path / name).read_text() == (REPO / "deploy" / "kubernetes" / name).read_text(), f"deploy/kubernetes/{name}: run make manifests"


def test_the_default_install_makes_its_token_and_a_configuration_the_service_accepts(helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = template(helm, namespace="autoscaling", release="nm")
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Secret", "nm-nodemanager-status") in names
    assert ("Namespace", "autoscaling") not in names  # helm --create-namespace, or namespace.create
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"] == {"app.kubernetes.io/name": "nodemanager", "app.kubernetes.io/instance": "nm"}
    assert len(pod["metadata"]["annotations"]["checksum/config"]) == 64  # a new provider.yaml rolls the pods
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    text = one(docs, "ConfigMap")["data"]["provider.yaml"]
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "from-the-secret")
    config, _ = parse_config(text, "provider.yaml", tmp_path)
    assert config.cluster.kubernetes is not None
    assert config.cluster.kubernetes.leader_election.namespace == "autoscaling"
    assert config.cluster.kubernetes.leader_election.lease_name == "nm-nodemanager"
    assert config.status.listen == "0.0.0.0:8080"
    assert config.pools[0].name == "general"


def test_the_production_example_renders_tls_monitoring_and_placement(helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = template(helm, "-f", str(EXAMPLE))
    kinds = {d["kind"] for d in docs}
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds
    assert "Secret" not in kinds  # existingSecret
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert spec["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert {"name": "tls", "secret": {"secretName": "nodemanager-status-tls"}} in spec["volumes"]
    assert spec["containers"][0]["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    monitor = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert monitor["authorization"]["credentials"] == {"name": "nodemanager-status-token", "key": "token"}
    dashboards = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]
    assert dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "from-the-secret")
    config_text = next(d for d in docs if d["kind"] == "ConfigMap" and "provider.yaml" in d["data"])["data"]["provider.yaml"]
    (tmp_path / "tls").mkdir()
    config = yaml.safe_load(config_text)
    assert config["status"]["tlsCertFile"] == "/etc/nodemanager/tls/tls.crt"
    assert [p["name"] for p in config["pools"]] == ["general", "gpu"]


def test_what_the_chart_renders_is_admitted_by_a_real_api_server(helm: str, plane: ControlPlane) -> None:
    """Every object of the production example (but the Prometheus Operator's), created with
    a server-side dry run: the API server's own schemas and admission check each field."""
    admin = api_client(plane)
    namespace = f"chart-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": namespace, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    try:
        docs = template(helm, "-f", str(EXAMPLE), "--set", "statusToken.existingSecret=", namespace=namespace, release=f"{namespace}-nodemanager")
        checked = [d for d in docs if d["kind"] not in CRDS]
        assert len(checked) >= 12
        utils.create_from_yaml(admin, yaml_objects=checked, dry_run="All")
        assert not [r for r in client.RbacAuthorizationV1Api(admin).list_cluster_role().items if r.metadata.name.startswith(namespace)]  # a dry run
        broken = copy.deepcopy(one(checked, "Deployment"))
        broken["spec"]["replicas"] = -1
        with pytest.raises(utils.FailToCreateError, match="replicas"):  # the check means something
            utils.create_from_yaml(admin, yaml_objects=[broken], dry_run="All")
    finally:
        core.delete_namespace(namespace)
