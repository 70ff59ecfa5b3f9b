"""Workload files hold Kubernetes objects as users have them: every field checked against the
API's schema, and what makes pods expanded to the pods its controller would make."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from nodemanager.cli import main
from nodemanager.cluster.workload import WorkloadError, parse_workload

PROVIDER = str(Path(__file__).resolve().parent.parent / "config" / "provider.yaml")

CONTAINER = {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}


def deployment(replicas: int = 30, **spec: object) -> dict:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [copy.deepcopy(CONTAINER)], **spec}}
    meta = {"name": "web", "namespace": "shop"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"replicas": replicas, "template": template}}


def test_a_list_holding_a_deployment_of_30_becomes_30_pods_with_their_requests():
    doc = {"apiVersion": "v1", "kind": "List", "items": [deployment(30)]}
    arrivals = parse_workload(yaml.safe_dump(doc), "list.yaml")
    assert len(arrivals) == 30
    pod = arrivals[0].pod
    assert (pod.namespace, pod.labels["app"]) == ("shop", "web")
    assert (pod.requests.cpu, pod.requests.memory) == (500, 2**30)  # millicores, bytes
    assert pod.owner is not None
    assert pod.owner.kind == "ReplicaSet"  # made again when evicted
    assert len({a.pod.key for a in arrivals}) == 30


def test_a_plain_deployment_yaml_is_a_workload():
    arrivals = parse_workload(yaml.safe_dump(deployment(3)), "deployment.yaml")
    assert [a.pod.name for a in arrivals] == ["web-0", "web-1", "web-2"]


def test_statefulsets_and_jobs_make_their_pods():
    pod_template = {"spec": {"containers": [CONTAINER]}}
    stateful = {"kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"replicas": 2, "serviceName": "db", "template": pod_template}}
    job = {"kind": "Job", "apiVersion": "batch/v1", "metadata": {"name": "crunch"}, "spec": {"parallelism": 5, "completions": 3, "template": pod_template}}
    arrivals = parse_workload(json.dumps({"kind": "List", "items": [stateful, job]}), "mixed.json")
    owners = sorted((a.pod.owner.kind, a.pod.name) for a in arrivals if a.pod.owner)
    assert owners == [("Job", "crunch-0"), ("Job", "crunch-1"), ("Job", "crunch-2"), ("StatefulSet", "db-0"), ("StatefulSet", "db-1")]


@pytest.mark.parametrize(
    ("typo", "path"),
    [
        ({"containers": [{"name": "c", "resource": {"requests": {"cpu": "1"}}}]}, "pods[0].pod.containers[0].resource: unknown field"),
        ({"containers": [{"name": "c", "resources": {"request": {"cpu": "1"}}}]}, "pods[0].pod.containers[0].resources.request: unknown field"),
        ({"containers": [{"name": "c"}], "nodeSelecter": {"zone": "a"}}, "pods[0].pod.nodeSelecter: unknown field"),
    ],
)
def test_each_typo_in_a_pod_spec_is_refused_with_its_path(typo, path):
    with pytest.raises(WorkloadError) as err:
        parse_workload(yaml.safe_dump({"pods": [{"name": "p", "pod": typo}]}), "typo.yaml")
    assert path in str(err.value)


def test_a_typo_inside_a_deployment_template_is_refused_with_its_path_and_exit_2(tmp_path, capsys):
    bad = deployment(2)
    bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requets": {"cpu": "1"}}
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(bad))
    assert main(["simulate", "--config", PROVIDER, "--workload", str(path), "--quiet"]) == 2
    assert "Deployment.spec.template.spec.containers[0].resources.requets: unknown field" in capsys.readouterr().err


def test_a_kubectl_get_pods_dump_is_simulated(tmp_path, capsys):
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u{i}", "resourceVersion": "7", "creationTimestamp": "2026-11-27T10:00:00Z"},
            "spec": {"containers": [CONTAINER], "nodeName": "ip-10-0-0-1.ec2.internal", "schedulerName": "default-scheduler"},
            "status": {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for i in range(4)
    ]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": pods, "metadata": {"resourceVersion": ""}}))
    assert main(["simulate", "--config", PROVIDER, "--workload", str(path), "--json", "--quiet", "--until", "10m"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pods"]["bound"] == 4


def test_a_kind_that_makes_no_pods_here_is_named():
    with pytest.raises(WorkloadError, match=r"items\[0\]: 'CronJob' makes no pods here"):
        parse_workload(json.dumps({"kind": "List", "items": [{"kind": "CronJob", "metadata": {"name": "x"}}]}), "x.json")


def test_a_listed_daemonset_is_read_as_the_clusters_and_makes_no_pending_pod():
    """`kubectl get deploy,ds -o yaml` holds DaemonSets: they were refused; each node runs
    one of their pods, so the scaler plans every node net of them."""
    from nodemanager.cluster.workload import parse_cluster_objects

    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "log-agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "log"}}, "template": {"metadata": {"labels": {"app": "log"}}, "spec": {"containers": [CONTAINER]}}},
    }
    text = json.dumps({"kind": "List", "items": [daemon, {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [CONTAINER]}}]})
    assert [a.pod.key for a in parse_workload(text, "x.json")] == ["default/p"]
    (found,) = parse_cluster_objects(text, "x.json").daemon_sets
    assert found.name == "log-agent"
    typo = copy.deepcopy(daemon)
    typo["spec"]["template"]["spec"]["nodeSelecter"] = {"a": "b"}
    with pytest.raises(WorkloadError, match=r"items\[0\]\.spec\.template\.spec\.nodeSelecter: unknown field"):
        parse_cluster_objects(json.dumps({"kind": "List", "items": [typo]}), "x.json")


def test_a_listed_job_runs_as_long_as_its_duration_annotation_says():
    """A Job's pods ran for good: a List carries no run time. The annotation gives it."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl"},
        "spec": {
            "parallelism": 2,
            "template": {
                "metadata": {"annotations": {"simulate.nodemanager.io/duration": "20m"}},
                "spec": {"containers": [CONTAINER], "restartPolicy": "Never"},
            },
        },
    }
    arrivals = parse_workload(json.dumps({"kind": "List", "items": [job]}), "x.json")
    assert [(a.pod.key, a.duration) for a in arrivals] == [("default/etl-0", 1200.0), ("default/etl-1", 1200.0)]
    job["spec"]["template"]["metadata"]["annotations"]["simulate.nodemanager.io/duration"] = "soon"
    with pytest.raises(WorkloadError, match=r"items\[0\]\.metadata\.annotations\.simulate\.nodemanager\.io/duration"):
        parse_workload(json.dumps({"kind": "List", "items": [job]}), "x.json")


def test_the_schema_snapshot_is_the_pinned_clients_own():
    """Fields are checked against ``api_schema.json`` (importing the client's models costs
    0.4 CPU-s a read); it must say what the client the constraints pin says, field for field
    (after an upgrade: ``python -m nodemanager.cluster.api_schema``)."""
    from nodemanager.cluster import api_schema
    from nodemanager.cluster.manifests import MODELS

    snapshot = json.loads(api_schema.SNAPSHOT.read_text())
    assert snapshot == api_schema.from_client(tuple(sorted(set(MODELS.values()))))
    assert "resources" in snapshot["models"]["V1Container"]
    assert "nodeSelector" in snapshot["models"]["V1PodSpec"]
    assert snapshot["models"]["V1PodTemplateSpec"]["spec"] == "V1PodSpec"  # (a Deployment's template reaches the pod's fields)
