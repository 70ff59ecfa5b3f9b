"""Real nodes: taints and cordons, DaemonSets, host ports and volumes, in the scaler and in simulation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from builders import CATALOG, binpack_pool, cell_pool, node, pod, scaler
from harness import Harness, arrive
from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.cluster.base import EventType, NodeEvent
from nodemanager.cluster.workload import parse_cluster_objects, parse_workload
from nodemanager.config import parse_config
from nodemanager.model import Node, Resources, Taint, TaintEffect, Toleration
from nodemanager.model.daemonset import DaemonSet, daemon_overhead
from nodemanager.model.ports import HostPort
from nodemanager.model.resources import BATCH_CPU
from nodemanager.model.selectors import Operator, Requirement, SelectorTerm
from nodemanager.model.volumes import BindingMode, PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeContext
from nodemanager.scaler import ClusterSnapshot
from nodemanager.simulator import Simulation


def compute(s, pods=(), nodes=(), now=100.0, **kw):
    return s.compute(ClusterSnapshot(tuple(pods), tuple(nodes), **kw), now)


def daemon_set(name: str, cpu: str, memory: str = "64Mi", **spec: object) -> DaemonSet:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}
    return DaemonSet.from_manifest({"metadata": {"name": name, "namespace": "kube-system"}, "spec": {"template": template}})


POOL = binpack_pool("general", instance_types=["a.large", "m.xlarge"])


# -- taints and cordons ---------------------------------------------------------------------


def test_a_pod_is_not_bound_to_a_node_tainted_by_an_operator():
    tainted = node("n1", pool="general").with_changes(taints=(Taint("dedicated", TaintEffect.NO_SCHEDULE, "db"),))
    d = compute(scaler(POOL), [pod("web")], [tainted])
    assert d.bindings["default/web"] != "n1"
    tolerant = dataclasses.replace(pod("db"), tolerations=(Toleration("dedicated", "Equal", "db"),))
    assert compute(scaler(POOL), [tolerant], [tainted]).bindings == {"default/db": "n1"}


def test_a_cordoned_node_takes_only_pods_that_tolerate_the_cordon():
    cordoned = node("n1", pool="general").with_changes(unschedulable=True)
    d = compute(scaler(POOL), [pod("web")], [cordoned])
    assert d.bindings["default/web"] != "n1"
    daemonish = dataclasses.replace(pod("agent"), tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists", "", TaintEffect.NO_SCHEDULE),))
    assert compute(scaler(POOL), [daemonish], [cordoned]).bindings == {"default/agent": "n1"}


def test_a_pod_goes_to_the_node_its_preferred_node_affinity_prefers_though_another_is_fuller():
    """kube scores preferred node affinity (NodeAffinity, weight 2): the preferred node wins
    over the fuller one MostAllocated alone would choose; without the preference, the fuller."""
    busy = dataclasses.replace(pod("busy", cpu="1", memory="2Gi"), node_name="n1")
    fuller, labelled = node("n1", pool="general"), node("n2", pool="general").with_changes(labels={"disk": "ssd"})
    prefers = dataclasses.replace(pod("web"), preferred_affinity=((50, SelectorTerm((Requirement("disk", Operator.IN, ("ssd",)),))),))
    assert compute(scaler(POOL), [busy, pod("web")], [fuller, labelled]).bindings["default/web"] == "n1"
    assert compute(scaler(POOL), [busy, prefers], [fuller, labelled]).bindings["default/web"] == "n2"


def test_an_earlier_binding_is_dropped_when_the_node_is_tainted():
    tainted = node("n1", pool="general", bound=("web",)).with_changes(taints=(Taint("dedicated", TaintEffect.NO_EXECUTE, "db"),))
    assert compute(scaler(POOL), [pod("web")], [tainted]).bindings["default/web"] != "n1"


TAINT_KEYS = ("dedicated", "gpu", "node.kubernetes.io/unschedulable")
EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE, TaintEffect.PREFER_NO_SCHEDULE)
taints = st.builds(Taint, st.sampled_from(TAINT_KEYS), st.sampled_from(EFFECTS), st.sampled_from(("", "a", "b")))
tolerations = st.one_of(
    st.builds(Toleration, st.sampled_from(TAINT_KEYS), st.just("Equal"), st.sampled_from(("", "a", "b")), st.sampled_from((None, *EFFECTS))),
    st.builds(Toleration, st.sampled_from(("", *TAINT_KEYS)), st.just("Exists"), st.just(""), st.sampled_from((None, *EFFECTS))),
)


def tolerated(taint: Taint, tolerations: tuple[Toleration, ...]) -> bool:
    """The API's rule, written out here on its own (core/v1 Toleration.ToleratesTaint)."""
    for t in tolerations:
        if t.effect is not None and t.effect != taint.effect:
            continue
        if t.operator == "Exists" and t.key in ("", taint.key):
            return True
        if t.operator == "Equal" and t.key == taint.key and t.value == taint.value:
            return True
    return False


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.lists(taints, max_size=3), st.booleans()), min_size=1, max_size=4),
    st.lists(st.lists(tolerations, max_size=3), min_size=1, max_size=6),
)
def test_no_pod_is_ever_bound_to_a_tainted_or_cordoned_node_it_does_not_tolerate(nodes_spec, pods_spec):
    nodes = [node(f"n{i}", pool="general").with_changes(taints=tuple(t), unschedulable=cordoned) for i, (t, cordoned) in enumerate(nodes_spec)]
    pods = [dataclasses.replace(pod(f"p{i}"), tolerations=tuple(t)) for i, t in enumerate(pods_spec)]
    decision = compute(scaler(POOL), pods, nodes)
    by_name = {n.name: n for n in nodes}
    by_key = {p.key: p for p in pods}
    for key, target in decision.bindings.items():
        if target not in by_name:
            continue  # a new node: nothing taints it but its pool
        n, p = by_name[target], by_key[key]
        hard = [t for t in n.taints if t.effect is not TaintEffect.PREFER_NO_SCHEDULE]
        if n.unschedulable:
            hard.append(Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE))
        assert all(tolerated(t, p.tolerations) for t in hard), (key, target, n.taints, n.unschedulable, p.tolerations)


# -- DaemonSets -----------------------------------------------------------------------------


def test_new_nodes_are_sized_with_room_for_their_daemonset_pods():
    ds = (daemon_set("proxy", "100m"), daemon_set("logs", "300m", "200Mi", tolerations=[{"operator": "Exists"}]))
    pods = [pod(f"w{i}", cpu="800m", memory="1Gi") for i in range(4)]
    d = compute(scaler(POOL), pods, daemon_sets=ds)
    for spec in d.start:  # an independent check: requests of every pod and daemon fit the machine's allocatable
        used = sum((p.requests for p in pods if p.key in spec.pods), start=daemon_overhead(ds, spec.labels, spec.taints))
        assert used.fits(CATALOG[spec.instance_type].allocatable), spec
        assert spec.allocatable == CATALOG[spec.instance_type].allocatable  # the record keeps the node's own allocatable
    # without them, two 800m pods share an a.large (1930m allocatable); with 400m of daemons they cannot
    assert len(compute(scaler(POOL), pods).start) < len(d.start) or {s.instance_type for s in d.start} != {"a.large"}


def test_a_daemonset_only_runs_where_its_selector_and_tolerations_allow():
    gpu_agent = daemon_set("gpu-agent", "1", nodeSelector={"accelerator": "nvidia"})
    assert daemon_overhead((gpu_agent,), {"accelerator": "nvidia"}, ()).cpu == 1000
    assert daemon_overhead((gpu_agent,), {}, ()).cpu == 0
    proxy = daemon_set("proxy", "100m")
    assert daemon_overhead((proxy,), {}, (Taint("dedicated", TaintEffect.NO_SCHEDULE, "db"),)) == daemon_overhead((), {}, ())
    # the controller's own tolerations: a cordoned or not-ready node still runs it
    assert daemon_overhead((proxy,), {}, (Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE),)).cpu == 100


def test_an_existing_node_keeps_room_for_a_daemonset_pod_not_running_yet():
    ds = (daemon_set("logs", "500m"),)
    n1 = node("n1", pool="general")
    # a.large has 1930m: 1500m fits alone, not beside the 500m log agent that will start there
    d = compute(scaler(POOL), [pod("w", cpu="1500m")], [n1], daemon_sets=ds)
    assert d.bindings["default/w"] != "n1"
    running = dataclasses.replace(ds[0].pod, name="logs-n1", node_name="n1", phase="Running")
    d = compute(scaler(POOL), [pod("w", cpu="1400m"), running], [n1], daemon_sets=ds)
    assert d.bindings == {"default/w": "n1"}


def test_a_node_with_only_daemonset_and_mirror_pods_is_idle():
    n1 = node("n1", pool="general")
    proxy = dataclasses.replace(pod("kube-proxy-n1", node="n1", phase="Running"), daemon_set="kube-system/kube-proxy")
    mirror = dataclasses.replace(pod("etcd-n1", node="n1", phase="Running"), mirror=True)
    d = compute(scaler(POOL, idle_grace=0), [proxy, mirror], [n1])
    assert [o.name for o in d.stop] == ["n1"]
    waiting_daemon = dataclasses.replace(pod("logs-x"), daemon_set="kube-system/logs")
    assert "default/logs-x" not in compute(scaler(POOL), [waiting_daemon]).bindings  # never a pod to place


# -- host ports -----------------------------------------------------------------------------


def test_two_pods_with_the_same_host_port_never_share_a_node():
    web = [dataclasses.replace(pod(f"web{i}"), host_ports=(HostPort(8080),)) for i in range(2)]
    d = compute(scaler(POOL), web)
    assert len(set(d.bindings.values())) == 2
    running = dataclasses.replace(pod("old", node="n1", phase="Running"), host_ports=(HostPort(8080, "TCP", "10.0.0.1"),))
    d = compute(scaler(POOL), [web[0], running], [node("n1", pool="general")])
    assert d.bindings["default/web0"] != "n1"  # 0.0.0.0:8080 conflicts with 10.0.0.1:8080
    udp = dataclasses.replace(pod("dns"), host_ports=(HostPort(8080, "UDP"),))
    assert compute(scaler(POOL), [udp, running], [node("n1", pool="general")]).bindings == {"default/dns": "n1"}


def test_pods_with_the_same_host_port_are_not_stacked_on_an_existing_node():
    """Hypothesis found it: identical pods with a host port were placed on an existing node
    as many as its resources held (the filters ran for the first of them only), though
    kube's NodePorts refuses the second."""
    web = [dataclasses.replace(pod(f"web{i}"), host_ports=(HostPort(8080),)) for i in range(3)]
    d = compute(scaler(POOL), web, [node("n1", "m.xlarge", pool="general")])
    assert sum(1 for target in d.bindings.values() if target == "n1") == 1
    assert len(d.bindings) == 3
    assert len(set(d.bindings.values())) == 3


# -- volumes --------------------------------------------------------------------------------

ZONE_KEY = "topology.kubernetes.io/zone"


def zonal(zone: str) -> tuple[SelectorTerm, ...]:
    return (SelectorTerm((Requirement(ZONE_KEY, Operator.IN, (zone,)),)),)


def test_pods_with_zonal_volumes_get_nodes_only_in_their_volumes_zones():
    claims = {f"default/data-{i}": PersistentVolumeClaim("default", f"data-{i}", f"pv-{i}", "gp3") for i in range(3)}
    volumes = {f"pv-{i}": PersistentVolume(f"pv-{i}", zonal("zone-1b"), "ebs.csi.aws.com") for i in range(3)}
    context = VolumeContext(claims, volumes, {"gp3": StorageClass("gp3", "ebs.csi.aws.com", BindingMode.WAIT_FOR_FIRST_CONSUMER)})
    pods = [dataclasses.replace(pod(f"db-{i}", cpu="1500m"), volume_claims=(f"default/data-{i}",)) for i in range(3)]
    d = compute(scaler(POOL), pods, [node("n1", pool="general", zone="zone-1a")], volumes=context)
    assert len(d.bindings) == 3
    assert {s.zone for s in d.start} == {"zone-1b"}
    assert "n1" not in d.bindings.values()


def test_an_unbound_claim_follows_its_class():
    wffc = StorageClass("zonal", "ebs.csi.aws.com", BindingMode.WAIT_FOR_FIRST_CONSUMER, zonal("zone-1a"))
    immediate = StorageClass("fast", "ebs.csi.aws.com", BindingMode.IMMEDIATE)
    claims = {"default/a": PersistentVolumeClaim("default", "a", "", "zonal"), "default/b": PersistentVolumeClaim("default", "b", "", "fast")}
    context = VolumeContext(claims, {}, {"zonal": wffc, "fast": immediate})
    a = dataclasses.replace(pod("a"), volume_claims=("default/a",))
    b = dataclasses.replace(pod("b"), volume_claims=("default/b",))
    missing = dataclasses.replace(pod("c"), volume_claims=("default/nope",))
    d = compute(scaler(POOL), [a, b, missing], volumes=context)
    assert [s.zone for s in d.start if "default/a" in s.pods] == ["zone-1a"]
    assert "unbound immediate PersistentVolumeClaims" in d.waiting["default/b"]  # waits for the volume controller
    assert 'persistentvolumeclaim "nope" not found' in d.waiting["default/c"]
    assert not d.unschedulable


def test_ebs_attach_limit_spreads_volumes_over_nodes():
    claims = {f"default/v{i}": PersistentVolumeClaim("default", f"v{i}", f"pv{i}", "gp3") for i in range(30)}
    volumes = {f"pv{i}": PersistentVolume(f"pv{i}", (), "ebs.csi.aws.com") for i in range(30)}
    context = VolumeContext(claims, volumes, {})
    pods = [dataclasses.replace(pod(f"p{i}", cpu="10m", memory="16Mi"), volume_claims=(f"default/v{i}",)) for i in range(30)]
    d = compute(scaler(binpack_pool("general", instance_types=["m.4xlarge"])), pods, volumes=context)
    per_node: dict[str, int] = {}
    for target in d.bindings.values():
        per_node[target] = per_node.get(target, 0) + 1
    assert len(d.bindings) == 30
    assert max(per_node.values()) <= 25


# -- in simulation --------------------------------------------------------------------------

SIM_CONFIG = """
controllerId: real
cloud: {provider: simulated}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 2m}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*"]
    startupTaints: [{key: node.cilium.io/agent-not-ready, value: "true", effect: NoSchedule}]
"""

DAEMONS = """
daemonSets:
  - metadata: {name: kube-proxy, namespace: kube-system}
    spec: {template: {spec: {containers: [{name: p, resources: {requests: {cpu: 100m}}}]}}}
  - metadata: {name: logs, namespace: kube-system}
    spec: {template: {spec: {tolerations: [{operator: Exists}], containers: [{name: l, resources: {requests: {cpu: 100m, memory: 200Mi}}}]}}}
"""


def simulate(workload: str, until: float | None = None):
    config, catalog = parse_config(SIM_CONFIG, "provider.yaml", Path("."))
    sim = Simulation(config, catalog, parse_workload(workload), None, parse_cluster_objects(workload))
    return sim, sim.run(until=until)


def test_a_node_left_with_only_daemonset_pods_is_stopped_after_the_idle_grace():
    workload = DAEMONS + "pods: [{name: job, duration: 5m, pod: {containers: [{name: c, resources: {requests: {cpu: '1', memory: 1Gi}}}]}}]\n"
    sim, report = simulate(workload)
    assert report["pods"]["bound"] == 1
    assert report["nodes"]["booted"] == 1
    assert report["nodes"]["terminated"] == 1
    assert not sim.cluster.nodes
    assert not [s for s in sim.cluster.pods.values() if s.pod.daemon_set]
    # it went for idleness: stopped by the scaler, not by anything else
    assert any(kind == "Node" and reason == "Terminating" and "unneeded" in message for kind, _, reason, message in sim.cluster.recorded)


def test_by_default_an_empty_node_is_stopped_a_minute_after_its_last_pod_ends():
    """The default idle grace is about what a new node takes to boot and join (60 s here):
    the pod is bound at 63 s and ends at 363 s; its node is still there 57 s later and gone
    a minute after."""
    config, catalog = parse_config(
        """
controllerId: defaults
cloud: {provider: simulated, simulated: {bootDelay: 40s}}
cluster: {source: simulated, simulated: {registerDelay: 20s}}
pools: [{name: general, instanceTypes: ["m5.*"]}]
""",
        "provider.yaml",
        Path("."),
    )
    workload = "pods: [{name: job, duration: 5m, pod: {containers: [{name: c, resources: {requests: {cpu: '1', memory: 1Gi}}}]}}]\n"
    for until, terminated in ((420.0, 0), (450.0, 1)):
        sim = Simulation(config, catalog, parse_workload(workload))
        report = sim.run(until=until)
        assert sim.cluster.first_bound == {"default/job": 63.0}
        assert report["nodes"]["terminated"] == terminated, until
    assert any(reason == "Terminating" and "(idle grace 60s)" in message for _, _, reason, message in sim.cluster.recorded)


def test_pods_wait_for_startup_taints_and_daemonset_pods_start_on_every_node():
    workload = DAEMONS + "pods: [{name: web, count: 2, pod: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}}]\n"
    sim, report = simulate(workload, until=120)
    assert report["pods"]["bound"] == 2
    nodes = sorted(sim.cluster.nodes)
    daemons = {(s.pod.daemon_set, s.pod.node_name) for s in sim.cluster.pods.values() if s.pod.daemon_set}
    assert daemons == {(ds, n) for ds in ("kube-system/kube-proxy", "kube-system/logs") for n in nodes}
    registered = {n: sim.cloud.describe(sim.cluster.nodes[n].instance_id).launched_at for n in nodes}
    for key, bound_at in sim.cluster.first_bound.items():
        # boot (30s) + registration (10s) + the agents that lift the startup taint (5s)
        node_name = sim.cluster.pods[key].pod.node_name
        assert bound_at >= registered[node_name] + 10 + 5, key


def test_a_cordoned_or_tainted_node_gets_no_new_pods_in_simulation():
    workload = """
nodeEvents:
  - {at: 1m, nodes: {nodemanager.io/pool: general}, cordon: true}
pods:
  - {name: first, pod: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}}
  - {name: second, at: 2m, pod: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}}
"""
    sim, report = simulate(workload, until=300)
    assert report["pods"]["bound"] == 2
    first, second = (sim.cluster.pods[f"default/{n}"].pod.node_name for n in ("first", "second"))
    assert first != second
    assert sim.cluster.nodes[first].unschedulable


def test_a_cell_node_running_only_daemonset_pods_takes_its_one_pod():
    """A cell node holds one pod besides its DaemonSet and mirror pods (CellIsolation does
    not count them); the scaler counted every pod on the node, so a cell node with a
    kube-proxy never took a pod and another node was booted for it."""
    cells = cell_pool()
    n1 = node("n1")
    proxy = dataclasses.replace(pod("kube-proxy-n1", node="n1", phase="Running"), daemon_set="kube-system/kube-proxy")
    d = compute(scaler(cells), [pod("job"), proxy], [n1])
    assert d.bindings == {"default/job": "n1"}
    assert not d.start


class OneNode:
    """A simulated cluster of one booted node: its record, its registered Node, and the
    view the scaler plans with (made again on each call)."""

    def __init__(self) -> None:
        self.h = h = Harness(binpack_pool("general"), arrivals=[arrive("p1", cpu="500m")])
        h.run(120)
        [self.name] = h.controller.state.nodes
        self.record = h.controller.state.nodes[self.name]
        self.registered = h.controller.state.cache.node(self.name)

    def planned(self) -> Node:
        [view] = self.h.controller.state._planning_nodes()
        return view

    def register(self, **changes: object) -> None:
        """The Node as the cluster now reports it: the current one with ``changes``."""
        node = dataclasses.replace(self.h.controller.state.cache.node(self.name), **changes)
        self.h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, node)])


def test_the_planning_view_follows_the_clusters_taints_and_cordon_and_is_kept_across_heartbeats():
    """The scaler plans with the cluster's taints and cordon (less startup and ephemeral
    taints); the view is kept while neither changed (a heartbeat shares the taints) and
    made again when either does."""
    one = OneNode()
    h, name, record, registered, planned = one.h, one.name, one.record, one.registered, one.planned

    dedicated = Taint("dedicated", TaintEffect.NO_SCHEDULE, "x")
    ephemeral = Taint("node.kubernetes.io/not-ready", TaintEffect.NO_SCHEDULE)
    h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, dataclasses.replace(registered, taints=(dedicated, ephemeral)))])
    tainted = planned()
    assert tainted.taints == (dedicated,)
    h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, h.controller.state.cache.node(name).with_heartbeat(registered.last_heartbeat + 10))])
    assert planned() is tainted  # a heartbeat: the same view
    h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, dataclasses.replace(h.controller.state.cache.node(name), unschedulable=True))])
    cordoned = planned()
    assert (cordoned.taints, cordoned.unschedulable) == ((dedicated,), True)
    h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, dataclasses.replace(h.controller.state.cache.node(name), taints=(), unschedulable=False))])
    assert planned() is record  # nothing to shed or take


def test_labels_an_operator_puts_on_a_node_are_planned_with_as_kube_scheduler_sees_them():
    """A label added to the Node after it registered (``kubectl label``, node-feature
    discovery) is what a pod's node selector matches, as kube-scheduler reads the Node; a
    label taken off again no longer matches. (Found by the differential test against the
    real kube-scheduler: such pods were left pending.)"""
    one = OneNode()
    h, name, record, registered, planned = one.h, one.name, one.record, one.registered, one.planned

    h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, dataclasses.replace(registered, labels={**registered.labels, "disk": "ssd"}))])
    labelled = planned()
    assert labelled.labels["disk"] == "ssd"
    ssd = dataclasses.replace(pod("wants-ssd", cpu="100m"), node_selector={"disk": "ssd"})
    assert compute(scaler(binpack_pool("general")), [ssd], [labelled]).bindings == {"default/wants-ssd": name}
    h.controller.state.cache.apply([NodeEvent(EventType.MODIFIED, dataclasses.replace(h.controller.state.cache.node(name), labels=dict(registered.labels)))])
    assert "disk" not in planned().labels
    assert planned() is record or planned().labels == {**record.labels, **registered.labels}


def test_a_node_is_planned_with_the_allocatable_its_kubelet_reports():
    """kube-scheduler fits pods into the Node's ``status.allocatable``; the catalog's figure
    (capacity less an estimate of what the kubelet reserves) holds only until the kubelet
    has reported. Batch resources stay as colocation keeps them in the record."""
    one = OneNode()
    reported = Resources({"cpu": 2000, "memory": 8 * 2**30, "pods": 110})
    one.register(allocatable=reported)
    assert one.planned().allocatable == reported
    one.h.controller.state.update_node(one.name, allocatable=Resources({**dict(reported.items()), BATCH_CPU: 500}))
    assert dict(one.planned().allocatable.items()) == {**dict(reported.items()), BATCH_CPU: 500}


def test_a_sidecars_host_port_keeps_pods_apart_as_current_kube_scheduler_does():
    """An init container with ``restartPolicy: Always`` runs beside the app containers, and
    its host port is taken on the node as theirs is (kube-scheduler 1.37's NodePorts; the
    real control plane test asks both versions). An ordinary init container's is not."""
    from nodemanager.model import Pod

    def with_port(name: str, where: str) -> Pod:
        port = {"containerPort": 9000, "hostPort": 9000}
        spec: dict = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]}
        if where == "app":
            spec["containers"][0]["ports"] = [port]
        else:
            init = {"name": "proxy", "ports": [port], **({"restartPolicy": "Always"} if where == "sidecar" else {})}
            spec["initContainers"] = [init]
        return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec})

    assert with_port("s", "sidecar").host_ports == (HostPort(9000, "TCP", "0.0.0.0"),)
    assert with_port("i", "init").host_ports == ()
    d = compute(scaler(POOL), [with_port("a", "app"), with_port("s", "sidecar")])
    assert len(set(d.bindings.values())) == 2
