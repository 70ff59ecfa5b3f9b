"""Persistent volumes as the scheduler sees them: where a pod's claims let it run.

* A claim bound to a PersistentVolume can only be used on nodes that the volume's
  ``nodeAffinity`` admits (an EBS volume lives in one zone).
* An unbound claim whose StorageClass binds ``WaitForFirstConsumer`` is provisioned where
  the pod lands, within the class's ``allowedTopologies``.
* An unbound claim whose class binds ``Immediate`` waits for the volume controller.
* A bound volume's zone and region labels (the older way to pin one; kube's VolumeZone) must
  be the node's too.

Kubernetes' VolumeBinding and NodeVolumeLimits plugins read the same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from nodemanager.errors import InvalidManifest
from nodemanager.model.labels import REGION, ZONE
from nodemanager.model.manifest import as_mapping
from nodemanager.model.pod import selector_terms
from nodemanager.model.selectors import Operator, Requirement, SelectorTerm

# The labels VolumeZone reads on a volume and a node, and the GA key a node may carry for a
# volume's beta one (kube's topologyLabels and translateToGALabel).
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, ZONE, BETA_REGION, REGION)
GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}
EBS_DRIVERS = frozenset({"ebs.csi.aws.com", "kubernetes.io/aws-ebs"})
#: kube-scheduler's EBS attach limits (``DefaultMaxEBSVolumes``, ``DefaultMaxEBSNitroVolumeLimit``).
XEN_EBS_LIMIT = 39
NITRO_EBS_LIMIT = 25
#: Families on the Xen hypervisor (every other current family is Nitro).
XEN_FAMILIES = frozenset(
    {"c1", "c3", "c4", "cc2", "cr1", "d2", "g2", "g3", "g3s", "h1", "hs1", "i2", "i3", "m1", "m2", "m3", "m4", "p2", "p3", "r3", "r4", "t1", "t2", "x1", "x1e"}
)


def ebs_attach_limit(instance_type: str) -> int:
    """How many EBS volumes kube-scheduler lets a node of this type attach."""
    family = instance_type.split(".", 1)[0]
    return XEN_EBS_LIMIT if family in XEN_FAMILIES else NITRO_EBS_LIMIT


class BindingMode(StrEnum):
    IMMEDIATE = "Immediate"
    WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: BindingMode = BindingMode.IMMEDIATE
    allowed_topologies: tuple[SelectorTerm, ...] = ()  # none: anywhere


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_affinity: tuple[SelectorTerm, ...] = ()  # none: any node
    driver: str = ""  # the CSI driver (or in-tree plugin) that serves it
    # its zone and region labels: (key, the values a node may have; "a__b" is two zones)
    topology: tuple[tuple[str, frozenset[str]], ...] = ()


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""  # the PersistentVolume it is bound to ("" while unbound)
    storage_class: str = ""
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class VolumeContext:
    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)

    def driver_of(self, claim: PersistentVolumeClaim) -> str:
        if claim.volume_name and (volume := self.volumes.get(claim.volume_name)) is not None:
            return volume.driver
        sc = self.classes.get(claim.storage_class)
        return sc.provisioner if sc is not None else ""


# --- parsing (API documents, as the server or a workload file gives them) ----------------------


def _name(doc: Mapping[str, Any], where: str) -> tuple[str, str]:
    meta = as_mapping(doc.get("metadata"), f"{where}.metadata")
    if not meta.get("name"):
        raise InvalidManifest(f"{where}.metadata.name", "required")
    return str(meta.get("namespace") or "default"), str(meta["name"])


def parse_claim(doc: Any, where: str) -> PersistentVolumeClaim:
    doc = as_mapping(doc, where)
    namespace, name = _name(doc, where)
    spec = as_mapping(doc.get("spec"), f"{where}.spec")
    deleting = bool(as_mapping(doc.get("metadata"), f"{where}.metadata").get("deletionTimestamp"))
    return PersistentVolumeClaim(namespace, name, str(spec.get("volumeName") or ""), str(spec.get("storageClassName") or ""), deleting)


def parse_volume(doc: Any, where: str) -> PersistentVolume:
    doc = as_mapping(doc, where)
    _, name = _name(doc, where)
    spec = as_mapping(doc.get("spec"), f"{where}.spec")
    required = as_mapping(as_mapping(spec.get("nodeAffinity"), f"{where}.spec.nodeAffinity").get("required"), f"{where}.spec.nodeAffinity.required")
    terms = selector_terms(required.get("nodeSelectorTerms"), f"{where}.spec.nodeAffinity.required.nodeSelectorTerms")
    csi = as_mapping(spec.get("csi"), f"{where}.spec.csi")
    driver = str(csi.get("driver") or ("kubernetes.io/aws-ebs" if spec.get("awsElasticBlockStore") else ""))
    labels = as_mapping(as_mapping(doc.get("metadata"), f"{where}.metadata").get("labels"), f"{where}.metadata.labels")
    topology = tuple((key, frozenset(str(labels[key]).split("__"))) for key in TOPOLOGY_LABELS if labels.get(key))
    return PersistentVolume(name, terms, driver, topology)


def parse_storage_class(doc: Any, where: str) -> StorageClass:
    doc = as_mapping(doc, where)
    _, name = _name(doc, where)
    mode_text = doc.get("volumeBindingMode") or "Immediate"
    try:
        mode = BindingMode(mode_text)
    except ValueError:
        raise InvalidManifest(f"{where}.volumeBindingMode", f"expected Immediate or WaitForFirstConsumer, got {mode_text!r}") from None
    terms = []
    for i, term in enumerate(doc.get("allowedTopologies") or []):
        tpath = f"{where}.allowedTopologies[{i}]"
        reqs = []
        for j, expr in enumerate(as_mapping(term, tpath).get("matchLabelExpressions") or []):
            e = as_mapping(expr, f"{tpath}.matchLabelExpressions[{j}]")
            values = tuple(str(v) for v in e.get("values") or [])
            if not e.get("key") or not values:
                raise InvalidManifest(f"{tpath}.matchLabelExpressions[{j}]", "needs a key and values")
            reqs.append(Requirement(str(e["key"]), Operator.IN, values))
        terms.append(SelectorTerm(tuple(reqs)))
    return StorageClass(name, str(doc.get("provisioner") or ""), mode, tuple(terms))
