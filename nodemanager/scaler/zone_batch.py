"""Groups whose only inter-pod constraints are on zones, planned one after another and
placed together.

A group with zone spread or zone affinity is given a zone per pod (``interpod_plan``) and
then packed as zonal pods, zone by zone: with many small groups (Karpenter's benchmark mix
has 49 spread groups of about 20 pods each), three packings per group of a few pods each,
most of a decision's time. Consecutive such groups (in the packer's order) are planned
here one after another, each against the zones the earlier ones chose (``Pending``: as if
their pods were placed), and their pods are then placed together, one packing per zone
and kind of node. The plan is the one a group at a time would make if every pod is
placed, and the bindings list the pods in plan order, group after group, so each passes
the filters given those before it. If some pod is left over (a pool's limit, say), the
later groups' plans counted a pod that is not there: everything placed here is taken off
again and each group is placed on its own, as without a batch.

A group joins only if nothing about it depends on where exactly its pods or the earlier
ones land beyond their zones: no anti-affinity of its own, no placed pod's anti-affinity
on a key but the hostname selecting it, spread counted over every node, no constraint left
once pinned to its zone (no hostname spread), no gang, claims, volumes or host ports.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from nodemanager.model import Pod, PodKey
from nodemanager.model.labels import HOSTNAME, ZONE
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.run import PodClass, Run
from nodemanager.scheduling.plugins.interpod import counted_nodes, spread_domains

PlaceGroup = Callable[[Run, list[PodClass]], None]  # a group placed on its own (``new_nodes._place_group``)
PlaceZoned = Callable[[Run, list[PodClass]], None]  # pinned classes placed (``_place_group`` with ``zoned``)
Report = Callable[[Run, list[PodClass], dict[int, list[tuple[str, bool]]]], None]


class ZoneBatch:
    def __init__(self, run: Run, place_group: PlaceGroup, place_zoned: PlaceZoned, report: Report) -> None:
        self.run = run
        self.place_group, self.place_zoned, self.report = place_group, place_zoned, report
        self.pending = plan.Pending(run.topology)
        # each group planned: its classes, their pods as they were, the zone chosen per pod, why the rest cannot go
        self.planned: list[tuple[list[PodClass], list[list[Pod]], dict[PodKey, str], str]] = []
        # per group taken: whether a placed pod's anti-affinity selects it (then its pods are
        # filtered as their own class; the others' pinned pods alike but for their labels are
        # one class: no filter tells their labels apart)
        self.apart: list[bool] = []

    def takes(self, group: list[PodClass]) -> bool:
        """Whether the group joins the batch (see the module's note)."""
        rep = next((c.rep for c in group if c.pods), None)
        if rep is None or not (plan.plannable(rep) and plan.zone_level(rep)):
            return False
        a = rep.pod_affinity
        if a.anti_required or rep.pod_group or rep.claims or rep.volume_claims or rep.host_ports:
            return False
        hard = [c for c in rep.spread if c.hard]
        if any(c.topology_key != ZONE or counted_nodes(rep, c) is not None for c in hard):
            return False
        return all(t.topology_key == HOSTNAME for t in self.run.topology.repelling(rep))

    def plan(self, group: list[PodClass]) -> None:
        """A zone for each of the group's pods, counting the pods planned before it."""
        run = self.run
        pending = [c for c in group if c.pods]
        rep = pending[0].rep
        zones = sorted(run.possible_zones(rep))
        pods = [p for c in pending for p in c.pods]
        chosen, why = plan.plan_zones(pods, zones, self.pending, lambda c: spread_domains(run.fw.handle, rep, c, run.topology), run.zone_load)
        if not zones:
            why = "no pool offers a zone the pod's node constraints accept"
        self.apart.append(bool(self.run.topology.repelling(rep)))
        for pod in pods:
            if (zone := chosen.get(pod.key)) is not None:
                self.pending.add(pod, zone)
        self.planned.append((pending, [list(c.pods) for c in pending], chosen, why))

    def flush(self) -> None:
        """Place the planned pods: together zone by zone, or (some left over) each group on its own."""
        if not self.planned:
            return
        planned, self.planned = self.planned, []
        self.pending.clear()
        run = self.run
        new_before = set(run.new_nodes)
        apart, self.apart = self.apart, []
        by_zone: dict[tuple, dict[tuple, list[Pod]]] = defaultdict(dict)  # (zone, node key) -> class -> pinned pods
        for g, (group, _, chosen, _) in enumerate(planned):
            for cls in group:
                pins: dict[str, dict] = {}
                for pod in cls.pods:
                    if (zone := chosen.get(pod.key)) is not None:
                        if zone not in pins:
                            pins[zone] = plan.pins(cls.rep, zone)
                        pinned = pod.constrained(**pins[zone])
                        shares = by_zone[zone, run.key(pinned, node_only=True)]
                        shares.setdefault((pinned.requests, pinned.spread, pinned.pod_affinity, id(cls) if apart[g] else None), []).append(pinned)
        for key in sorted(by_zone, key=lambda k: k[0]):
            self.place_zoned(run, [PodClass(members) for members in by_zone[key].values()])
        keys = [k for _, _, chosen, _ in planned for k in chosen]
        if all(k in run.bindings for k in keys):
            for k in keys:  # in plan order, group after group
                run.bindings[k] = run.bindings.pop(k)
            for group, _, chosen, why in planned:
                for cls in group:
                    cls.pods = [p for p in cls.pods if p.key not in chosen]
                self.report(run, group, {id(c): [(why, False)] for c in group})
            return
        # Some pod was left over: the later plans counted it. Undone, and placed group by group.
        for k in keys:
            run.waiting.pop(k, None)
            run.unschedulable.pop(k, None)
            if k in run.bindings:
                run.unplace(k)
        for name in set(run.new_nodes) - new_before:
            if not run.new_nodes[name].info.pods:
                run.forget(name)
        for group, pods, _, _ in planned:
            for cls, members in zip(group, pods, strict=True):
                cls.pods = members
            self.place_group(run, group)
