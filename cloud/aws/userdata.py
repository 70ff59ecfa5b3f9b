"""The user data that makes an instance a node of an EKS cluster, per image family (as
Karpenter's AMI families write it), with the operator's own user data kept beside it:

* AL2023: MIME multipart; nodeadm reads the ``NodeConfig`` part (cluster, kubelet flags), and
  cloud-init runs the operator's parts (a script, cloud-config, or NodeConfigs of their own,
  which nodeadm merges over ours).
* AL2: MIME multipart; the operator's parts, then a script calling ``/etc/eks/bootstrap.sh``.
* Bottlerocket: one TOML document; the operator's settings with ours merged over them.
* Custom: the operator's user data alone.

Label and taint keys and values were checked against Kubernetes' rules when the config was
read (``check_label``), so they hold no quote or shell character; the script quotes anyway.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import threading
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from email import message_from_string
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from typing import Any

import yaml

from cloud.aws.settings import DEFAULT_SERVICE_CIDR, USER_DATA_BYTES, AwsSettings, EksCluster, ImageFamily
from cloud.base import BootRequest, format_taints
from cloud.catalog import Catalog
from cloud.errors import CloudError
from nodemanager.model import Taint

BOUNDARY = "//"  # Karpenter's
_PLACEHOLDER = re.compile(r"\{(node_name|pool|labels|taints|controller_id|instance_type|zone|capacity_type)\}")
log = logging.getLogger("nodemanager.cloud.aws")
NODE_CONFIG = "application/node.eks.aws"


def node_user_data(
    family: ImageFamily, eks: EksCluster | None, own: str, labels: Mapping[str, str], taints: Sequence[Taint], *, max_pods: int | None = None
) -> str:
    """The user data for one node: ``own`` is the operator's, placeholders already filled in;
    ``max_pods`` the kubelet's pod limit, the figure the planner used for the type (the VPC
    CNI's per-type formula, at most 110), so the node admits what was planned for it."""
    if family is ImageFamily.CUSTOM or eks is None:
        return own
    if not eks.complete:
        raise ValueError(f"EKS cluster {eks.name}: its endpoint and CA are needed (AwsCloud.cluster reads them)")
    if family is ImageFamily.BOTTLEROCKET:
        return _bottlerocket(eks, own, labels, taints, max_pods)
    label_text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    taint_text = format_taints(taints)
    flags = [f"--node-labels={label_text}"] if label_text else []
    if taint_text:
        flags.append(f"--register-with-taints={taint_text}")
    if family is ImageFamily.AL2023:
        config = {
            "apiVersion": "node.eks.aws/v1alpha1",
            "kind": "NodeConfig",
            "spec": {
                "cluster": {
                    "name": eks.name,
                    "apiServerEndpoint": eks.endpoint,
                    "certificateAuthority": eks.certificate_authority,
                    "cidr": eks.service_cidr or DEFAULT_SERVICE_CIDR,
                },
                "kubelet": {"flags": flags, **({"config": {"maxPods": max_pods}} if max_pods else {})},
            },
        }
        return _multipart([(NODE_CONFIG, yaml.safe_dump(config, sort_keys=False)), *_parts(own)])
    command = ["/etc/eks/bootstrap.sh", eks.name, "--apiserver-endpoint", eks.endpoint, "--b64-cluster-ca", eks.certificate_authority]
    if max_pods:
        command += ["--use-max-pods", "false"]
        flags.append(f"--max-pods={max_pods}")
    if flags:
        command += ["--kubelet-extra-args", " ".join(flags)]
    bootstrap = "#!/bin/bash\nset -euo pipefail\n" + shlex.join(command) + "\n"
    return _multipart([*_parts(own), ("text/x-shellscript", bootstrap)])


def _parts(own: str) -> list[tuple[str, str]]:
    """The operator's user data as MIME parts: a multipart document's own parts, else one
    part typed by what it starts with."""
    text = own.strip()
    if not text:
        return []
    if text.startswith("MIME-Version") or text.lower().startswith("content-type: multipart"):
        return [(part.get_content_type(), str(part.get_payload())) for part in message_from_string(text).walk() if not part.is_multipart()]
    if text.startswith("#cloud-config"):
        return [("text/cloud-config", own)]
    if text.startswith("apiVersion: node.eks.aws"):
        return [(NODE_CONFIG, own)]
    return [("text/x-shellscript", own)]


def _multipart(parts: Sequence[tuple[str, str]]) -> str:
    message = MIMEMultipart(boundary=BOUNDARY)
    for content_type, payload in parts:
        maintype, _, subtype = content_type.partition("/")
        part = MIMEBase(maintype, subtype)
        part.set_payload(payload)
        message.attach(part)
    return message.as_string()


def _bottlerocket(eks: EksCluster, own: str, labels: Mapping[str, str], taints: Sequence[Taint], max_pods: int | None) -> str:
    settings: dict[str, Any] = tomllib.loads(own) if own.strip() else {}
    kubernetes = settings.setdefault("settings", {}).setdefault("kubernetes", {})
    kubernetes.update({"cluster-name": eks.name, "api-server": eks.endpoint, "cluster-certificate": eks.certificate_authority})
    if max_pods:
        kubernetes.setdefault("max-pods", max_pods)  # the operator's own figure wins
    if labels:
        kubernetes.setdefault("node-labels", {}).update(labels)
    if taints:
        node_taints = kubernetes.setdefault("node-taints", {})
        for taint in taints:
            node_taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
    return _toml(settings)


def _toml(table: Mapping[str, Any], path: tuple[str, ...] = ()) -> str:
    """TOML for nested tables of strings, numbers, booleans and lists of them (what
    Bottlerocket's settings are); every key quoted, every string a JSON string, which is a
    valid TOML basic string."""
    plain = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
    lines = [f"[{'.'.join(json.dumps(p) for p in path)}]"] if path and plain else []
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in plain]
    text = "\n".join(lines) + ("\n\n" if lines else "")
    for key, value in table.items():
        if isinstance(value, Mapping):
            text += _toml(value, (*path, key))
    return text


def render_user_data(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{node_name}``, ``{pool}``, ``{labels}``, ``{taints}`` and friends; every other
    brace (shell ``${VAR}``, JSON) is left as written."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


class NodeJoin:
    """The user data that makes each booted instance a node of its cluster; the EKS cluster's
    endpoint, CA and service network as provider.yaml gives them, or read once with
    DescribeCluster (``describe``, the cloud's call) at the first boot that needs them."""

    def __init__(self, settings: AwsSettings, controller_id: str, catalog: Catalog, describe: Callable[[str], Mapping[str, Any]]) -> None:
        self.settings = settings
        self.controller_id = controller_id
        self.catalog = catalog
        self._describe = describe
        self._cluster: EksCluster | None = None
        self._cluster_lock = threading.Lock()

    def user_data(self, request: BootRequest, family: ImageFamily) -> str:
        """The user data of ``request``'s instance: the operator's template with its
        placeholders filled in, and what its image's ``family`` needs to join the cluster."""
        template = self.settings.user_data or ""
        values = {
            "node_name": request.node_name,
            "pool": request.pool,
            "labels": ",".join(f"{k}={v}" for k, v in sorted(request.labels.items())),
            "taints": ",".join(f"{t.key}={t.value}:{t.effect}" for t in request.taints),
            "controller_id": self.controller_id,
            "instance_type": request.instance_type,
            "zone": request.zone,
            "capacity_type": request.capacity_type.value,
        }
        own = render_user_data(template, values)
        itype = self.catalog.get(request.instance_type)
        taints = (*request.taints, *request.startup_taints)
        text = node_user_data(family, self.cluster(), own, request.labels, taints, max_pods=itype.max_pods if itype else None)
        size = len(text.encode())
        if size > USER_DATA_BYTES:
            raise CloudError(f"user data for {request.node_name} is {size} bytes, over EC2's limit of {USER_DATA_BYTES}: shorten cloud.aws.userData")
        return text

    def cluster(self) -> EksCluster | None:
        """The EKS cluster nodes join with every value a node needs: as provider.yaml gives
        them, or read once with DescribeCluster (at the first boot that needs them)."""
        given = self.settings.eks
        if given is None or given.complete:
            return given
        with self._cluster_lock:
            if self._cluster is None:
                self._cluster = self._describe_cluster(given)
            return self._cluster

    def _describe_cluster(self, given: EksCluster) -> EksCluster:
        found = self._describe(given.name)
        endpoint, authority = found.get("endpoint"), (found.get("certificateAuthority") or {}).get("data")
        if not endpoint or not authority:
            raise CloudError(f"EKS cluster {given.name} is {found.get('status', 'not ready')}: it has no endpoint or certificate yet, so no node can join it")
        network = found.get("kubernetesNetworkConfig") or {}
        resolved = replace(
            given,
            endpoint=given.endpoint or endpoint,
            certificate_authority=given.certificate_authority or authority,
            service_cidr=given.service_cidr or network.get("serviceIpv4Cidr") or DEFAULT_SERVICE_CIDR,
        )
        log.info("EKS cluster %s read with DescribeCluster: endpoint %s, service CIDR %s", given.name, resolved.endpoint, resolved.service_cidr)
        return resolved
