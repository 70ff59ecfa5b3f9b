"""Connecting to the API server: in-cluster (the pod's ServiceAccount) when running in a
cluster and no kubeconfig is named, else a kubeconfig (the named file, or $KUBECONFIG, or
~/.kube/config). Credentials come only from those standard places.

urllib3's own retries are off: a failed request or watch is retried by nodemanager's loops
and reflectors with their backoff, said once, instead of three urllib3 warnings per failure."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from nodemanager.config.cluster_schema import KubernetesCluster
from nodemanager.errors import ConfigError
from nodemanager.tally import ErrorTally

log = logging.getLogger("nodemanager.kubernetes")
CONNECTIONS = 48  # urllib3's pool per API client: thirteen watches, sixteen binds, the loops' calls


def api_client(settings: KubernetesCluster, errors: ErrorTally | None = None) -> client.ApiClient:
    """A client of the API server the settings name; ``errors`` (when given) counts each
    failed request by method and HTTP status (or the connection error's class)."""
    if settings.kubeconfig is not None and not Path(settings.kubeconfig).is_file():
        raise ConfigError("the kubeconfig", [f"cluster.kubernetes.kubeconfig: no such file: {settings.kubeconfig}"])
    configuration = client.Configuration()
    try:
        if settings.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=settings.kubeconfig, context=settings.context, client_configuration=configuration)
    except (config.ConfigException, OSError, ValueError) as exc:
        where = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ConfigError("the kubeconfig", [f"cluster.kubernetes.kubeconfig: cannot connect using {where!r}: {exc}"]) from None
    configuration.retries = 0
    # One connection per watch (thirteen kinds) and the loops' calls besides: urllib3's
    # default pool of 10 dropped connections ("Connection pool is full") on a real cluster.
    configuration.connection_pool_maxsize = CONNECTIONS
    if not configuration.verify_ssl:  # insecure-skip-tls-verify: said once, not on every request
        log.warning("cluster.kubernetes: the API server's certificate is not verified (insecure-skip-tls-verify in the kubeconfig)")
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    api = client.ApiClient(configuration)
    if errors is not None:
        _count_errors(api, errors)
    return api


def _count_errors(api: client.ApiClient, errors: ErrorTally) -> None:
    request = api.rest_client.request

    def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return request(method, url, *args, **kwargs)
        except ApiException as exc:
            errors.failed(method, str(exc.status))
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            errors.failed(method, type(exc).__name__)
            raise

    api.rest_client.request = counted


def identity() -> str:
    """This replica's name in leader election: the pod (or host) name and a random suffix,
    so a restarted replica never mistakes itself for its predecessor."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
