"""Connecting to the API server: in-cluster (the pod's ServiceAccount) when running in a
cluster and no kubeconfig is named, else a kubeconfig (the named file, or $KUBECONFIG, or
~/.kube/config). Credentials come only from those standard places.

urllib3's own retries are off: a failed request or watch is retried by nodemanager's loops
and reflectors with their backoff, said once, instead of three urllib3 warnings per failure."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from kubernetes import client, config

from nodemanager.config.schema import KubernetesCluster
from nodemanager.errors import ConfigError


def api_client(settings: KubernetesCluster) -> client.ApiClient:
    if settings.kubeconfig is not None and not Path(settings.kubeconfig).is_file():
        raise ConfigError("provider.yaml", [f"cluster.kubernetes.kubeconfig: no such file: {settings.kubeconfig}"])
    configuration = client.Configuration()
    try:
        if settings.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=settings.kubeconfig, context=settings.context, client_configuration=configuration)
    except (config.ConfigException, OSError, ValueError) as exc:
        where = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ConfigError("provider.yaml", [f"cluster.kubernetes.kubeconfig: cannot connect using {where!r}: {exc}"]) from None
    configuration.retries = 0
    return client.ApiClient(configuration)


def identity() -> str:
    """This replica's name in leader election: the pod (or host) name and a random suffix,
    so a restarted replica never mistakes itself for its predecessor."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
