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
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from email import message_from_string
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from typing import Any

import yaml

from cloud.base import format_taints
from nodemanager.config.schema import DEFAULT_SERVICE_CIDR, EksCluster, ImageFamily
from nodemanager.model import Taint

BOUNDARY = "//"  # Karpenter's
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
