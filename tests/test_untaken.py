"""``untaken``: the existing nodes a fill may still place pods on, told in C, are those whose
``cell_taken`` is false, in their order, whatever pods (their own, DaemonSet ones) they hold."""

from __future__ import annotations

import dataclasses

from builders import CATALOG, binpack_pool, cell_pool, node, pod
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.model import PodPhase
from nodemanager.scaler.pools import node_node_info, pool_views
from nodemanager.scheduling.nodeinfo import untaken

VIEWS = pool_views([cell_pool(), binpack_pool()], CATALOG, 0, {})


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2), st.integers(0, 2)), max_size=12))
def test_untaken_nodes_are_those_not_cell_taken(shapes: list[tuple[bool, int, int]]) -> None:
    infos = []
    for i, (cell, own, daemons) in enumerate(shapes):
        view = VIEWS[0] if cell else VIEWS[1]
        info = node_node_info(node(f"n{i}", "a.large" if cell else "m.xlarge", pool=view.name), view, CATALOG, 0)
        for j in range(own):
            info.add_pod(pod(f"p{i}-{j}", "100m", node=f"n{i}", phase=PodPhase.RUNNING))
        for j in range(daemons):
            info.add_pod(dataclasses.replace(pod(f"ds{i}-{j}", "100m", node=f"n{i}", phase=PodPhase.RUNNING), daemon_set="kube-system/ds"))
        infos.append(info)
    assert untaken(infos) == [i for i in infos if not i.cell_taken]


def test_a_cell_node_holding_only_daemonset_pods_is_untaken_and_one_holding_its_pod_is_taken() -> None:
    view = VIEWS[0]
    daemon = dataclasses.replace(pod("ds", "100m", node="a", phase=PodPhase.RUNNING), daemon_set="kube-system/ds")
    bare, held = (node_node_info(node(name, "a.large", pool=view.name), view, CATALOG, 0) for name in ("a", "b"))
    bare.add_pod(daemon)
    held.add_pod(pod("p", "100m", node="b", phase=PodPhase.RUNNING))
    assert untaken([bare, held]) == [bare]
