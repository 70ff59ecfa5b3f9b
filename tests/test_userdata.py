"""The user data that joins a node to EKS, per image family, parsed back with each format's
own reader: MIME (email), the NodeConfig (YAML, with the fields nodeadm reads), the
bootstrap.sh command line (shlex) and Bottlerocket's TOML (tomllib)."""

from __future__ import annotations

import base64
import shlex
import tomllib
from email import message_from_string
from pathlib import Path

import pytest
import yaml
from test_deploy_kubernetes import KUBECONFIG

from cloud.aws.settings import ImageFamily
from cloud.aws.userdata import node_user_data
from nodemanager.config import parse_config
from nodemanager.config.cloud_schema import EksCluster
from nodemanager.errors import ConfigError
from nodemanager.model import Taint, TaintEffect

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC...\n-----END CERTIFICATE-----\n").decode()
EKS = EksCluster(
    name="prod-east", endpoint="https://ABCDEF0123.gr7.us-east-1.eks.amazonaws.com", certificateAuthority=CA, serviceCIDR="172.20.0.0/16"
).for_cloud()
LABELS = {"nodemanager.io/pool": "general", "team": "web"}
TAINTS = (Taint("dedicated", TaintEffect.NO_SCHEDULE, "web"), Taint("example.com/starting", TaintEffect.NO_EXECUTE, ""))


def parts(text: str) -> list[tuple[str, str]]:
    message = message_from_string(text)
    assert message.is_multipart()
    return [(p.get_content_type(), p.get_payload()) for p in message.walk() if not p.is_multipart()]


def test_al2023_writes_a_node_config_nodeadm_reads_and_keeps_the_operators_script():
    text = node_user_data(ImageFamily.AL2023, EKS, "#!/bin/bash\necho hello\n", LABELS, TAINTS, max_pods=29)
    (first_type, first), (second_type, second) = parts(text)
    assert first_type == "application/node.eks.aws"
    config = yaml.safe_load(first)
    assert (config["apiVersion"], config["kind"]) == ("node.eks.aws/v1alpha1", "NodeConfig")
    cluster = config["spec"]["cluster"]
    assert cluster == {"name": "prod-east", "apiServerEndpoint": EKS.endpoint, "certificateAuthority": CA, "cidr": "172.20.0.0/16"}
    assert config["spec"]["kubelet"]["flags"] == [
        "--node-labels=nodemanager.io/pool=general,team=web",
        "--register-with-taints=dedicated=web:NoSchedule,example.com/starting:NoExecute",
    ]
    assert config["spec"]["kubelet"]["config"] == {"maxPods": 29}  # the figure the planner used for the type
    assert (second_type, second) == ("text/x-shellscript", "#!/bin/bash\necho hello\n")


def test_al2023_keeps_the_parts_of_an_operators_own_multipart_document():
    own = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\npackages: [jq]\n--b--\n'
    found = parts(node_user_data(ImageFamily.AL2023, EKS, own, {}, ()))
    assert [t for t, _ in found] == ["application/node.eks.aws", "text/cloud-config"]
    assert "packages: [jq]" in found[1][1]
    assert "flags: []" in found[0][1]


def test_al2_runs_the_operators_part_then_bootstrap_sh_with_the_cluster_and_kubelet_flags():
    found = parts(node_user_data(ImageFamily.AL2, EKS, "#cloud-config\nruncmd: [date]\n", LABELS, TAINTS, max_pods=29))
    assert [t for t, _ in found] == ["text/cloud-config", "text/x-shellscript"]
    command = shlex.split(found[1][1].splitlines()[-1])
    assert command[:2] == ["/etc/eks/bootstrap.sh", "prod-east"]
    assert command[command.index("--apiserver-endpoint") + 1] == EKS.endpoint
    assert command[command.index("--b64-cluster-ca") + 1] == CA
    assert command[command.index("--use-max-pods") + 1] == "false"
    assert command[command.index("--kubelet-extra-args") + 1] == (
        "--node-labels=nodemanager.io/pool=general,team=web --register-with-taints=dedicated=web:NoSchedule,example.com/starting:NoExecute --max-pods=29"
    )


def test_bottlerocket_settings_are_toml_with_the_operators_settings_merged():
    own = '[settings.host-containers.admin]\nenabled = true\n[settings.kubernetes]\nmax-pods = 58\n[settings.kubernetes.node-labels]\n"extra" = "yes"\n'
    settings = tomllib.loads(node_user_data(ImageFamily.BOTTLEROCKET, EKS, own, LABELS, TAINTS, max_pods=29))["settings"]
    kubernetes = settings["kubernetes"]
    assert (kubernetes["cluster-name"], kubernetes["api-server"], kubernetes["cluster-certificate"]) == ("prod-east", EKS.endpoint, CA)
    assert kubernetes["max-pods"] == 58  # the operator's own setting kept over the type's 29
    assert kubernetes["node-labels"] == {"extra": "yes", **LABELS}
    assert kubernetes["node-taints"] == {"dedicated": ["web:NoSchedule"], "example.com/starting": [":NoExecute"]}
    assert settings["host-containers"]["admin"]["enabled"] is True


def test_custom_is_the_operators_user_data_alone():
    assert node_user_data(ImageFamily.CUSTOM, EKS, "#!/bin/bash\n", LABELS, TAINTS) == "#!/bin/bash\n"


BASE = """controllerId: prod-east
nodes: {bootImageSpec: {owners: ["602401143452"], filters: {name: ["amazon-eks-node-al2023-x86_64-standard-1.31-*"]}}}
pools: [{name: a}]
"""


def test_check_config_refuses_bootstrap_sh_with_an_al2023_family_and_a_family_without_its_cluster():
    with pytest.raises(ConfigError, match=r"cloud.aws: .*userData calls /etc/eks/bootstrap.sh, which AL2023 images do not have"):
        parse_config(
            BASE + "cloud: {provider: aws, aws: {region: us-east-1, imageFamily: AL2023, userData: '/etc/eks/bootstrap.sh prod-east', "
            f"eks: {{name: prod-east, endpoint: '{EKS.endpoint}', certificateAuthority: {CA}}}}}}}\n",
            "p.yaml",
            Path("."),
        )
    with pytest.raises(ConfigError, match=r"imageFamily AL2023 needs eks"):
        parse_config(BASE + "cloud: {provider: aws, aws: {region: us-east-1, imageFamily: AL2023}}\n", "p.yaml", Path("."))


def test_the_shipped_configs_join_al2023_nodes_with_nodeadm(monkeypatch, tmp_path):
    """config/examples/aws.yaml, the ConfigMap and the systemd example select AL2023 images: their family is
    AL2023, their user data has no bootstrap.sh, and the NodeConfig names the cluster."""
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "t")
    repo = Path(__file__).resolve().parent.parent
    configmap = yaml.safe_load((repo / "deploy" / "kubernetes" / "configmap.yaml").read_text())["data"]["provider.yaml"]
    shipped = [
        ("aws.yaml", (repo / "config" / "examples" / "aws.yaml").read_text()),
        ("configmap", configmap),
        ("systemd", (repo / "deploy" / "systemd" / "provider.yaml").read_text().replace("/etc/nodemanager/kubeconfig", str(tmp_path / "kubeconfig"))),
    ]
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)  # the host's, which check-config reads
    for label, text in shipped:
        config, _ = parse_config(text, label, repo / "config" / "examples")
        aws = config.cloud.aws
        assert aws is not None
        assert aws.image_family is ImageFamily.AL2023, label
        plain = aws.for_cloud()  # as the cloud is given them
        found = parts(node_user_data(plain.image_family, plain.eks, plain.user_data or "", LABELS, TAINTS))
        assert found[0][0] == "application/node.eks.aws", label
        assert yaml.safe_load(found[0][1])["spec"]["cluster"]["name"] == aws.eks.name  # type: ignore[union-attr]


def test_check_config_refuses_the_old_shipped_mismatch_an_al2023_image_booted_with_bootstrap_sh(tmp_path, capsys):
    from nodemanager.cli import main

    path = tmp_path / "p.yaml"
    path.write_text(BASE + 'cloud: {provider: aws, aws: {region: us-east-1, userData: "#!/bin/bash\\n/etc/eks/bootstrap.sh prod-east"}}\n')
    assert main(["check-config", str(path)]) == 2
    assert "cloud.aws.userData: calls /etc/eks/bootstrap.sh, but nodes.bootImageSpec selects AL2023 images" in capsys.readouterr().err
