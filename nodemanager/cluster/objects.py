"""The official client's objects as model objects.

The client's own serializer (``ApiClient.sanitize_for_serialization``) turns a ``V1Pod``
into exactly the camelCase document the API server sends, so one parser serves both
manifests and client objects and they cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient

from nodemanager.model import Pod

_SERIALIZER = ApiClient()


def to_manifest(obj: Any) -> dict[str, Any]:
    """Any client model object (V1Pod, V1Node, ...) as its API document."""
    return _SERIALIZER.sanitize_for_serialization(obj)


def pod_from_v1(pod: Any) -> Pod:
    return Pod.from_manifest(to_manifest(pod))
