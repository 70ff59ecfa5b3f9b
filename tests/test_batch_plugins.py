"""The framework asks each plugin about many nodes at once (``Framework.feasible``, each
plugin's ``filter_nodes`` and ``score_nodes``) and leaves out what kube's PreFilter and
PreScore Skip leave out. None of it may change an answer: these check, over random pods and
nodes, that the batch answers are the one-node answers, that a skipped Filter would have
passed every node, and that a skipped Score would have scored every node the same."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.model import CapacityType, Pod, Resources, Taint, TaintEffect
from nodemanager.model.pod import CAPACITY_TYPE_ANNOTATION, INSTANCE_TYPE_ANNOTATION, ZONE_ANNOTATION
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE, Profile
from nodemanager.scheduling.registry import default_registry
from nodemanager.scheduling.status import Code

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ZONES = ("z-a", "z-b")
TYPES = ("m.large", "c.large")
GI = 2**30
#: The default profile with no PreFilter that may Skip: every Filter runs for every pod.
NO_SKIPS = replace(DEFAULT_PROFILE, pre_filter=("NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"))

taints = st.lists(
    st.builds(Taint, st.sampled_from(["dedicated", "gpu"]), st.sampled_from(list(TaintEffect)), st.sampled_from(["", "a"])),
    max_size=2,
    unique_by=lambda t: (t.key, t.effect),
).map(tuple)


@st.composite
def pods(draw: st.DrawFn, name: str = "incoming") -> Pod:
    # Round amounts too: a request equal to what a node has left, or naming no cpu at all.
    requests = {"cpu": f"{draw(st.sampled_from([0, 1000, 2000]) | st.integers(0, 4000))}m", "memory": f"{draw(st.integers(0, 8))}Gi"}
    if draw(st.booleans()):  # beyond cpu and memory: NodeResourcesFit's general path
        requests["nvidia.com/gpu"] = str(draw(st.integers(1, 2)))
    container: dict = {"name": "c", "resources": {"requests": requests, "limits": {k: v for k, v in requests.items() if k == "nvidia.com/gpu"}}}
    if draw(st.booleans()):
        container["ports"] = [{"containerPort": 80, "hostPort": draw(st.sampled_from([8080, 9090]))}]
    spec: dict = {"containers": [container]}
    if draw(st.booleans()):
        spec["nodeSelector"] = {ZONE: draw(st.sampled_from(ZONES))}
    if draw(st.booleans()):
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [draw(st.sampled_from(ZONES))]}]}]
                }
            }
        }
    preferred = draw(st.lists(st.tuples(st.integers(1, 100), st.sampled_from(ZONES)), max_size=2))
    if preferred:  # preferred node affinity: NodeAffinity's score
        terms = [{"weight": w, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}} for w, zone in preferred]
        spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = terms
    keys = st.sampled_from(["dedicated", "gpu", "node.kubernetes.io/unschedulable"])
    spec["tolerations"] = draw(st.lists(st.fixed_dictionaries({"key": keys, "operator": st.just("Exists")}), max_size=2))
    annotations = {}
    if draw(st.booleans()):
        annotations[INSTANCE_TYPE_ANNOTATION] = draw(st.sampled_from(["m.*", "c.large"]))
    if draw(st.booleans()):
        annotations[CAPACITY_TYPE_ANNOTATION] = draw(st.sampled_from(["spot", "on-demand", "any"]))
    if draw(st.booleans()):
        annotations[ZONE_ANNOTATION] = draw(st.sampled_from(ZONES))
    # Where other pods are: hard spread and required (anti-)affinity on a zone or a hostname,
    # selecting pods by ``app``; and a pod that names its node.
    key, app = st.sampled_from([ZONE, HOSTNAME]), st.sampled_from(["a", "b"])
    if draw(st.booleans()):
        selector = {"matchLabels": {"app": draw(app)}}
        spec["topologySpreadConstraints"] = [
            {"maxSkew": draw(st.integers(1, 2)), "topologyKey": draw(key), "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
        ]
    for kind in draw(st.lists(st.sampled_from(["podAffinity", "podAntiAffinity"]), max_size=2, unique=True)):
        term = {"labelSelector": {"matchLabels": {"app": draw(app)}}, "topologyKey": draw(key)}
        spec.setdefault("affinity", {})[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if draw(st.integers(0, 5)) == 0:
        spec["nodeName"] = f"n{draw(st.integers(0, 3))}"
    metadata = {"name": name, "namespace": "default", "annotations": annotations, "labels": {"app": draw(app)}}
    return Pod.from_manifest({"metadata": metadata, "spec": spec})


@st.composite
def nodes(draw: st.DrawFn) -> list[NodeInfo]:
    out = []
    pools = draw(st.lists(taints, min_size=1, max_size=3))  # a pool's nodes share its taint list (one object), as the scaler's do
    for i in range(draw(st.integers(1, 8))):
        zone = draw(st.sampled_from(ZONES))
        cpu, memory, slots, gpus = draw(st.integers(1, 8)) * 1000, draw(st.integers(1, 16)) * GI, draw(st.integers(1, 6)), draw(st.integers(0, 4))
        allocatable = Resources({"cpu": cpu, "memory": memory, "pods": slots, "nvidia.com/gpu": gpus})
        info = NodeInfo(
            f"n{i}",
            "p",
            draw(st.sampled_from(TYPES)),
            draw(st.sampled_from(list(CapacityType))),
            zone,
            allocatable,
            {ZONE: zone, HOSTNAME: f"n{i}"},
            draw(st.sampled_from(pools)),
            cell=draw(st.booleans()),
            unschedulable=draw(st.booleans()),
        )
        for j in range(draw(st.integers(0, 3))):
            placed = draw(pods(f"placed-{i}-{j}"))
            info.add_pod(placed)
        out.append(info)
    return out


def _prefiltered(pod: Pod, infos: list[NodeInfo], profile: Profile = DEFAULT_PROFILE) -> tuple[Framework, CycleState]:
    """A framework over ``infos`` and the cycle state its PreFilters left for ``pod``."""
    fw = Framework(profile, default_registry())
    fw.handle.node_infos = {n.name: n for n in infos}
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, pod).is_success()
    return fw, state


@settings(max_examples=150, deadline=None)
@given(pods(), nodes(), st.integers(-1, 7), st.booleans())
def test_the_nodes_every_filter_passes_are_those_each_node_passes_alone(pod: Pod, infos: list[NodeInfo], on: int, daemon: bool) -> None:
    if 0 <= on < len(infos):  # the pod already placed there (a binding checked again), maybe beside a DaemonSet pod
        infos[on].add_pod(pod)
        if daemon:
            infos[on].add_pod(replace(pod, name="ds-pod", daemon_set="kube-system/ds"))
    for profile in (DEFAULT_PROFILE, NO_SKIPS):
        fw, state = _prefiltered(pod, infos, profile)
        alone = [n.name for n in infos if fw.run_filter_plugins(state, pod, n).is_success()]
        assert [n.name for n in fw.feasible(state, pod, infos)] == alone


@settings(max_examples=150, deadline=None)
@given(pods(), nodes())
def test_each_filter_passes_over_many_nodes_the_nodes_it_passes_one_by_one(pod: Pod, infos: list[NodeInfo]) -> None:
    """Plugin by plugin, over all the nodes: in ``feasible`` a plugin sees only the nodes
    the plugins before it passed, often too few to tell."""
    fw, state = _prefiltered(pod, infos, NO_SKIPS)
    for plugin in fw._filter:
        alone = [n.name for n in infos if (status := plugin.filter(state, pod, n)) is None or status.is_success()]
        assert [n.name for n in plugin.filter_nodes(state, pod, infos)] == alone, plugin.name


@settings(max_examples=150, deadline=None)
@given(pods(), nodes())
def test_a_filter_prefilter_skips_would_have_passed_every_node(pod: Pod, infos: list[NodeInfo]) -> None:
    fw, state = _prefiltered(pod, infos)
    for plugin in fw._filter:
        if plugin.name in state.skip_filter:
            assert all(plugin.filter(CycleState(), pod, n) is None for n in infos), plugin.name


@settings(max_examples=150, deadline=None)
@given(pods(), nodes())
def test_scores_of_many_nodes_are_each_nodes_score_and_a_skipped_score_ranks_nothing(pod: Pod, infos: list[NodeInfo]) -> None:
    fw, state = _prefiltered(pod, infos)
    registry = default_registry()
    least = registry.create("LeastAllocated", fw.handle, {})
    for plugin in [p for p, _ in fw._score] + [least]:
        alone = {n.name: plugin.score(state, pod, n)[0] for n in infos}
        many, status = plugin.score_nodes(state, pod, infos)
        assert status is None
        assert many == alone, plugin.name
        if plugin.pre_score(state, pod, infos) is not None:
            assert plugin.pre_score(state, pod, infos).code is Code.SKIP
            if plugin.name == "BalancedAllocation":
                continue  # kube skips a best-effort pod by design: its balance is not to count
            plugin.normalize_score(state, pod, alone)
            assert len(set(alone.values())) == 1, plugin.name  # every node the same: leaving it out changes no order


ALLOCATION_SCORES = replace(DEFAULT_PROFILE, score=(("MostAllocated", 1), ("BalancedAllocation", 2), ("LeastAllocated", 3)))


@settings(max_examples=150, deadline=None)
@given(pods(), nodes())
def test_allocation_scores_sharing_one_batch_score_as_each_alone(pod: Pod, infos: list[NodeInfo]) -> None:
    """The allocation scores share their rows within one ``run_score_plugins``; each still
    gives every node its own score, and nothing shared outlives the call."""
    fw, state = _prefiltered(pod, infos, ALLOCATION_SCORES)
    for _ in range(2):  # again after a pod lands: the second call sees the node as it is now
        scores, status = fw.run_score_plugins(state, pod, infos)
        assert status.is_success()
        assert state.score_batch is None
        for plugin, weight in fw._score:
            if plugin.name not in scores:  # (BalancedAllocation skips a pod that asks for neither)
                skipped = plugin.pre_score(CycleState(), pod, infos)
                assert skipped is not None
                assert skipped.code is Code.SKIP, plugin.name
                continue
            assert scores[plugin.name] == {n.name: plugin.score(CycleState(), pod, n)[0] * weight for n in infos}, plugin.name
        if infos:
            infos[0].add_pod(replace(pod, name=f"{pod.name}-{len(infos[0].pods)}"))


def _plain_pod(name: str, **requests: str) -> Pod:
    resources = {"requests": requests, "limits": {k: v for k, v in requests.items() if k == "nvidia.com/gpu"}}
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c", "resources": resources}]}})


def _node(name: str, cpu: int, memory: int, slots: int, gpus: int = 0, *placed: Pod) -> NodeInfo:
    info = NodeInfo(name, "p", "m.large", CapacityType.ON_DEMAND, "z-a", Resources({"cpu": cpu, "memory": memory, "pods": slots, "nvidia.com/gpu": gpus}), {})
    for pod in placed:
        info.add_pod(pod)
    return info


def test_resources_fit_over_many_nodes_at_the_edges() -> None:
    """NodeResourcesFit compares cpu-and-memory pods with each node's free counts: a request
    equal to what is left fits, what a pod does not ask for is not checked (an overcommitted
    node still takes a pod asking no cpu), a node with no pod slot left takes nothing, and a
    pod asking for GPUs is checked on every resource."""
    two_cpus = _plain_pod("hog", cpu="2", memory="1Gi")
    nodes = [
        _node("exact", 2000, 2 * GI, 3),
        _node("overcommitted", 1000, 4 * GI, 3, 0, two_cpus),
        _node("no-slot", 8000, 8 * GI, 1, 1, _plain_pod("only", cpu="100m")),
        _node("gpu", 8000, 8 * GI, 3, 1),
        _node("short", 1999, 8 * GI, 3, 1),
    ]
    cases = [
        (_plain_pod("fits-exactly", cpu="2", memory="2Gi"), ["exact", "gpu"]),
        (_plain_pod("no-cpu", memory="1Gi"), ["exact", "overcommitted", "gpu", "short"]),
        (_plain_pod("nothing"), ["exact", "overcommitted", "gpu", "short"]),
        (_plain_pod("one-gpu", cpu="1", **{"nvidia.com/gpu": "1"}), ["gpu", "short"]),
        (_plain_pod("two-gpus", **{"nvidia.com/gpu": "2"}), []),
    ]
    for pod, expected in cases:
        fw, state = _prefiltered(pod, nodes)
        alone = [n.name for n in nodes if fw.run_filter_plugins(state, pod, n).is_success()]
        assert alone == expected, pod.name
        assert [n.name for n in fw.feasible(state, pod, nodes)] == expected, pod.name
    overcommitted = nodes[1].clone()
    assert (overcommitted.alloc_cpu, overcommitted.free_cpu, overcommitted.free_memory, overcommitted.free_pods) == (1000, -1000, 3 * GI, 2)
    moved = nodes[0].clone()
    moved.add_pod(_plain_pod("half", cpu="1"))
    moved.set_allocatable(Resources({"cpu": 3000, "memory": 2 * GI, "pods": 3}))  # the free counts follow both
    assert (moved.free_cpu, moved.free_memory, moved.free_pods) == (2000, 2 * GI, 2)
    moved.remove_pod(_plain_pod("half").key)
    assert (moved.free_cpu, moved.free_pods) == (3000, 3)
