"""metrics.k8s.io documents (as metrics-server serves them) to node metrics."""

from datetime import UTC, datetime

from nodemanager.cluster.metrics_api import node_metrics, read_metrics

NODES = [
    {"metadata": {"name": "n1"}, "timestamp": "2026-11-21T10:00:00Z", "window": "20.05s", "usage": {"cpu": "2500m", "memory": "6Gi"}},
    {"metadata": {"name": "n2"}, "timestamp": "2026-11-21T10:00:05Z", "usage": {"cpu": "100m", "memory": "512Mi"}},
]
PODS = [
    {
        "metadata": {"name": "web", "namespace": "shop"},
        "containers": [{"name": "a", "usage": {"cpu": "1", "memory": "2Gi"}}, {"name": "b", "usage": {"cpu": "250m", "memory": "1Gi"}}],
    },
    {"metadata": {"name": "gone", "namespace": "shop"}, "containers": [{"name": "a", "usage": {"cpu": "5", "memory": "1Gi"}}]},
    {"metadata": {"name": "big", "namespace": "x"}, "containers": [{"name": "a", "usage": {"cpu": "1", "memory": "1Gi"}}]},
]


def test_pods_sum_their_containers_and_system_usage_is_the_rest():
    metrics = node_metrics(NODES, PODS, {"shop/web": "n1", "x/big": "n2"})
    n1 = metrics["n1"]
    assert (n1.pods["shop/web"].cpu, n1.pods["shop/web"].memory) == (1250, 3 * 2**30)
    assert (n1.system_cpu, n1.system_memory) == (1250, 3 * 2**30)
    assert n1.update_time == datetime(2026, 11, 21, 10, tzinfo=UTC).timestamp()
    assert "shop/gone" not in n1.pods  # a pod the cache does not place on this node
    assert (metrics["n2"].system_cpu, metrics["n2"].system_memory) == (0, 0)  # clamped


def test_read_through_the_custom_objects_api():
    calls = []

    class CustomObjects:
        def list_cluster_custom_object(self, group, version, plural):
            calls.append((group, version, plural))
            return {"items": NODES if plural == "nodes" else PODS}

    metrics = read_metrics(CustomObjects(), {"shop/web": "n1"})
    assert calls == [("metrics.k8s.io", "v1beta1", "nodes"), ("metrics.k8s.io", "v1beta1", "pods")]
    assert set(metrics) == {"n1", "n2"}


def test_missing_timestamp_means_no_update_time():
    assert node_metrics([{"metadata": {"name": "n"}, "usage": {}}], [], {})["n"].update_time is None
