"""Step 4: gangs (PodGroups). Members are held at Permit until ``minMember`` of them have
capacity; a gang short of that when planning ends, or left short by the boot cap, fails as
a whole (``BindingNodeScaler`` plans it again after every other pod, then leaves it out)."""

from __future__ import annotations

from collections import defaultdict

from nodemanager.model import Pod, PodKey
from nodemanager.scaler.run import Run


def settle_gangs(run: Run) -> None:
    """Members still held at Permit when planning ends are rejected; Unreserve runs."""
    for waiting in run.fw.handle.iterate_over_waiting_pods():
        waiting.reject("pod group did not reach minMember in this computation", "PodGroup")
    for waiting, outcome in run.fw.take_resolved():
        if not outcome.is_success():
            run.failed[waiting.pod.key] = outcome.message


def failed_gangs(run: Run) -> dict[PodKey, str]:
    """Every member of each gang that failed, with why: the gang moves as a whole (a
    member no pool accepts stays unschedulable, in its turn)."""
    pods = {p.key: p for p in run.snapshot.pods}
    gangs = {(pods[k].namespace, pods[k].pod_group) for k in run.failed}
    stalled = {k: why for k, why in run.waiting.items() if k not in run.excluded and (pods[k].namespace, pods[k].pod_group) in gangs}
    return {**stalled, **run.failed}


def drop_incomplete_gangs(run: Run) -> None:
    """A gang that the cap left below its minimum fails as a whole."""
    bound = (run.infos[node].pods[key] for key, node in run.bindings.items())
    if any(pod.pod_group and pod.pod_group_min_member > 1 for pod in bound):  # (else no gang to count)
        _fail_short_gangs(run)
    run.drop_empty_new_nodes()


def _fail_short_gangs(run: Run) -> None:
    members: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    placed: dict[tuple[str, str], int] = defaultdict(int)
    for info in run.infos.values():
        for pod in info.pods.values():
            if pod.pod_group and pod.pod_group_min_member > 1:
                placed[(pod.namespace, pod.pod_group)] += 1
                if pod.key in run.bindings:
                    members[(pod.namespace, pod.pod_group)].append(pod)
    for group, pods in members.items():
        if placed[group] < pods[0].pod_group_min_member:
            for pod in pods:
                run.failed[pod.key] = f"pod group {group[1]}: fewer than {pod.pod_group_min_member} members can be booted in this loop"
