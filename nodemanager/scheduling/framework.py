"""The framework: runs a profile's plugins with the semantics of kube-scheduler v1alpha1.

* PreFilter: an unschedulable status aborts with ``rejected by "<plugin>" at prefilter``;
  any other failure becomes Error.
* Filter: plugins run in order and stop at the first non-success; unschedulable codes
  exclude the node, anything else becomes Error and aborts the attempt.
* Score: every score must land in [0, 100] after NormalizeScore; totals are weighted
  sums (a weight of 0 counts as 1); ties are broken by a seeded draw, never dict order.
* Reserve: the first failure becomes Error and Unreserve is *not* run; after a
  successful Reserve every later failure (Permit, PreBind, Bind) runs Unreserve.
* Permit: Wait holds the pod in the waiting map until every waiting plugin allows it,
  one rejects it, or its deadline (capped at 15 minutes, virtual time) passes.
* Bind: plugins run until one returns something other than Skip.

A framework is built per scheduling run (per scaler computation): plugins may keep state
for that run, and nothing survives it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key

from nodemanager.errors import InvalidManifest
from nodemanager.model import Pod
from nodemanager.scheduling import interfaces as ifc
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE, Profile
from nodemanager.scheduling.registry import Registry, default_registry
from nodemanager.scheduling.status import SKIP, SUCCESS, Code, Status, error
from nodemanager.scheduling.waiting import MAX_PERMIT_WAIT, WaitingPod

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class FrameworkConfigError(ValueError):
    """The profile cannot be built; ``problems`` are ``point[i]: what is wrong`` lines."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    node: str | None
    status: Status
    filtered: Mapping[str, Status]  # why each rejected node was rejected
    feasible: int


class Framework:
    def __init__(self, profile: Profile = DEFAULT_PROFILE, registry: Registry | None = None, seed: int = 0) -> None:
        registry = registry or default_registry()
        self.profile = profile
        self.handle = ifc.FrameworkHandle()
        self.seed = seed
        problems: list[str] = []
        points = profile.points()
        instances: dict[str, ifc.Plugin] = {}
        broken: set[str] = set()  # plugins whose arguments were refused
        for point, names in points.items():
            seen: set[str] = set()
            for i, name in enumerate(names):
                where = f"{point}[{i}]"
                if name in seen:
                    problems.append(f"{where}: {name!r} is listed twice")
                    continue
                seen.add(name)
                if name not in registry:
                    problems.append(f"{where}: unknown plugin {name!r}; known: {', '.join(registry)}")
                    continue
                if name in broken:
                    continue
                if name not in instances:
                    try:
                        instances[name] = registry.create(name, self.handle, profile.plugin_args.get(name, {}))
                    except (ValueError, TypeError) as exc:
                        problems.append(_args_problem(name, exc))
                        broken.add(name)
                        continue
                if not isinstance(instances[name], ifc.EXTENSION_POINTS[point]):
                    problems.append(f"{where}: plugin {name!r} does not implement {point}")
        for name, args in profile.plugin_args.items():  # arguments of a plugin not enabled are checked too, not ignored
            if name not in registry:
                problems.append(f"pluginArgs.{name}: unknown plugin; known: {', '.join(registry)}")
            elif name not in instances and name not in broken:
                try:
                    registry.create(name, self.handle, args)
                except (ValueError, TypeError) as exc:
                    problems.append(_args_problem(name, exc))
        if len(points["queueSort"]) != 1:
            problems.append(f"queueSort: exactly one plugin must be enabled, got {len(points['queueSort'])}")
        for name, weight in profile.score:
            if weight < 0:
                problems.append(f"score: weight of {name!r} must be >= 0, got {weight}")
        if problems:
            raise FrameworkConfigError(problems)
        self._registry, self._points = registry, points
        # What ``fresh`` makes each plugin from, looked up once (a scaler makes a framework per
        # computation), or the instance it shares (a plugin that keeps nothing).
        self._makers = tuple(
            (name, registry.factory(name), profile.plugin_args.get(name, {}), plugin if plugin.keeps_nothing else None) for name, plugin in instances.items()
        )
        self._assemble(instances)

    def fresh(self) -> Framework:
        """A framework of this profile with plugins and a handle of its own (nothing of a run
        carried over: the plugins that keep nothing and never read the handle are shared),
        without checking the profile again: a scaler makes one per decision."""
        out = object.__new__(Framework)
        out.profile, out.seed, out._registry, out._points, out._makers = self.profile, self.seed, self._registry, self._points, self._makers
        handle = out.handle = ifc.FrameworkHandle()
        out._assemble({name: make(handle, args) if shared is None else shared for name, make, args, shared in self._makers})
        return out

    def _assemble(self, instances: dict[str, ifc.Plugin]) -> None:
        """The plugins of each extension point, in the profile's order."""
        points, profile = self._points, self.profile

        def pick(point: str) -> list[ifc.Plugin]:
            return [instances[n] for n in points[point]]

        self._queue_sort: ifc.QueueSortPlugin = pick("queueSort")[0]  # type: ignore[assignment]
        self._pre_filter: list[ifc.PreFilterPlugin] = pick("preFilter")  # type: ignore[assignment]
        self._filter: list[ifc.FilterPlugin] = pick("filter")  # type: ignore[assignment]
        # The same nodes pass every filter whatever order they run in: ``feasible`` runs those
        # that sift first (on a busy cluster most nodes fail on their free room), then the rest.
        self._sifting: list[ifc.FilterPlugin] = sorted(self._filter, key=lambda p: not p.sifts_first)
        self._post_filter: list[ifc.PostFilterPlugin] = pick("postFilter")  # type: ignore[assignment]
        self._score: list[tuple[ifc.ScorePlugin, int]] = [(instances[n], w or 1) for n, w in profile.score]  # type: ignore[misc]
        self._reserve: list[ifc.ReservePlugin] = pick("reserve")  # type: ignore[assignment]
        self._unreserve: list[ifc.UnreservePlugin] = pick("unreserve")  # type: ignore[assignment]
        self._permit: list[ifc.PermitPlugin] = pick("permit")  # type: ignore[assignment]
        self._pre_bind: list[ifc.PreBindPlugin] = pick("preBind")  # type: ignore[assignment]
        self._bind: list[ifc.BindPlugin] = pick("bind")  # type: ignore[assignment]
        self._post_bind: list[ifc.PostBindPlugin] = pick("postBind")  # type: ignore[assignment]
        self.plugins: Mapping[str, ifc.Plugin] = instances

    # -- queue sort ---------------------------------------------------------------------
    def less(self, a: Pod, b: Pod) -> bool:
        return self._queue_sort.less(a, b)

    def sort_pods(self, pods: Iterable[Pod]) -> list[Pod]:
        pods = list(pods)
        if pods and self._queue_sort.sort_key(pods[0]) is not None:
            return sorted(pods, key=self._queue_sort.sort_key)
        return sorted(pods, key=cmp_to_key(lambda a, b: -1 if self.less(a, b) else (1 if self.less(b, a) else 0)))

    # -- filtering ----------------------------------------------------------------------
    def run_pre_filter_plugins(self, state: CycleState, pod: Pod) -> Status:
        """Every PreFilter; one that returns Skip has its Filter left out for this pod."""
        skipped = set()
        for plugin in self._pre_filter:
            status = plugin.pre_filter(state, pod)
            if status is None:
                continue
            code = status.code
            if code is Code.SUCCESS:
                continue
            if code is Code.SKIP:
                skipped.add(plugin.name)
                continue
            if status.is_unschedulable():
                return Status(status.code, f'rejected by "{plugin.name}" at prefilter: {status.message}', plugin.name)
            return error(f'error while running "{plugin.name}" prefilter plugin for pod "{pod.key}": {status.message}', plugin.name)
        state.skip_filter = frozenset(skipped)
        return SUCCESS

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return self._run_extensions(state, pod, added, node, add=True)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return self._run_extensions(state, pod, removed, node, add=False)

    def _run_extensions(self, state: CycleState, pod: Pod, other: Pod, node: NodeInfo, *, add: bool) -> Status:
        for plugin in self._pre_filter:
            ext = plugin.pre_filter_extensions()
            if ext is None or plugin.name in state.skip_filter:
                continue
            status = (ext.add_pod(state, pod, other, node) if add else ext.remove_pod(state, pod, other, node)) or SUCCESS
            if not status.is_success():
                return error(f'error while running "{plugin.name}" {"add" if add else "remove"}pod extension: {status.message}', plugin.name)
        return SUCCESS

    def run_filter_plugins(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        skipped = state.skip_filter
        for plugin in self._filter:
            if skipped and plugin.name in skipped:
                continue
            status = plugin.filter(state, pod, node)
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.is_unschedulable():
                return Status(status.code, status.message, status.plugin or plugin.name)
            return error(f'running "{plugin.name}" filter plugin for pod "{pod.key}": {status.message}', plugin.name)
        return SUCCESS

    def feasible(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        """The nodes every Filter passes, in order: ``run_filter_plugins`` succeeds for exactly
        these, but each plugin looks at all of them at once (``filter_nodes``), those that
        sift most first."""
        skipped = state.skip_filter
        left = list(nodes)
        for plugin in self._sifting:
            if not left:
                break
            if not (skipped and plugin.name in skipped):
                left = plugin.filter_nodes(state, pod, left)
        return left

    def run_post_filter_plugins(self, state: CycleState, pod: Pod, feasible: list[NodeInfo], filtered: Mapping[str, Status]) -> Status:
        for plugin in self._post_filter:
            status = plugin.post_filter(state, pod, feasible, filtered) or SUCCESS
            if not status.is_success():
                return error(f'error while running "{plugin.name}" postfilter plugin for pod "{pod.key}": {status.message}', plugin.name)
        return SUCCESS

    # -- scoring ------------------------------------------------------------------------
    def run_score_plugins(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, dict[str, int]], Status]:
        """Weighted scores per plugin and node, or an Error status. A plugin whose PreScore
        returns Skip is left out (kube's SkipScorePlugins). The plugins may share what they
        derive from these nodes in ``state.score_batch`` for the length of the call."""
        state.score_batch = {}
        try:
            return self._scores(state, pod, nodes)
        finally:
            state.score_batch = None

    def _scores(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, dict[str, int]], Status]:
        out: dict[str, dict[str, int]] = {}
        for plugin, weight in self._score:
            status = plugin.pre_score(state, pod, nodes) or SUCCESS
            if status.code is Code.SKIP:
                continue
            if not status.is_success():
                return {}, error(f'error while running "{plugin.name}" prescore plugin for pod "{pod.key}": {status.message}', plugin.name)
            scores, failed = plugin.score_nodes(state, pod, nodes)
            if failed is not None:
                return {}, error(f'error while running score plugin "{plugin.name}" for pod "{pod.key}": {failed.message}', plugin.name)
            status = plugin.normalize_score(state, pod, scores) or SUCCESS
            if not status.is_success():
                return {}, error(f'error while running normalize score plugin "{plugin.name}" for pod "{pod.key}": {status.message}', plugin.name)
            if scores and not MIN_NODE_SCORE <= min(scores.values()) <= max(scores.values()) <= MAX_NODE_SCORE:
                bad = next(name for name, value in scores.items() if not MIN_NODE_SCORE <= value <= MAX_NODE_SCORE)
                return {}, error(
                    f'score plugin "{plugin.name}" returns an invalid score {scores[bad]} for node "{bad}", it should be in the range of [0, 100]', plugin.name
                )
            out[plugin.name] = scores if weight == 1 else {name: value * weight for name, value in scores.items()}
        return out, Status()

    def select_host(self, pod: Pod, totals: Mapping[str, int]) -> str:
        """The highest total; ties broken by a draw seeded by the framework seed and the pod."""
        rng = random.Random(f"{self.seed}/{pod.uid}")
        best, chosen, ties = -1, "", 0
        for name in sorted(totals):
            score = totals[name]
            if score > best:
                best, chosen, ties = score, name, 1
            elif score == best:
                ties += 1
                if rng.randrange(ties) == 0:  # reservoir sampling: the k-th tie wins with 1/k
                    chosen = name
        return chosen

    def schedule(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> ScheduleResult:
        """PreFilter, Filter, PostFilter, Score and host selection over ``nodes``."""
        status = self.run_pre_filter_plugins(state, pod)
        if not status.is_success():
            return ScheduleResult(None, status, {}, 0)
        feasible: list[NodeInfo] = []
        filtered: dict[str, Status] = {}
        for node in nodes:
            status = self.run_filter_plugins(state, pod, node)
            if status.code is Code.ERROR:
                return ScheduleResult(None, status, filtered, 0)
            if status.is_success():
                feasible.append(node)
            else:
                filtered[node.name] = status
        status = self.run_post_filter_plugins(state, pod, feasible, filtered)
        if not status.is_success():
            return ScheduleResult(None, status, filtered, len(feasible))
        if not feasible:
            return ScheduleResult(None, Status(Code.UNSCHEDULABLE, f"0/{len(nodes)} nodes are available"), filtered, 0)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, Status(), filtered, 1)
        scores, status = self.run_score_plugins(state, pod, feasible)
        if not status.is_success():
            return ScheduleResult(None, status, filtered, len(feasible))
        totals = {n.name: sum(s[n.name] for s in scores.values()) for n in feasible}
        return ScheduleResult(self.select_host(pod, totals), Status(), filtered, len(feasible))

    # -- reserve / permit / bind --------------------------------------------------------
    def run_reserve_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for plugin in self._reserve:
            status = plugin.reserve(state, pod, node_name) or SUCCESS
            if not status.is_success():
                return error(f'error while running "{plugin.name}" reserve plugin for pod "{pod.key}": {status.message}', plugin.name)
        return SUCCESS

    def run_unreserve_plugins(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for plugin in self._unreserve:
            plugin.unreserve(state, pod, node_name)

    def run_permit_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Success, Unschedulable / Error, or Wait (the pod is then in the waiting map)."""
        waits: dict[str, float] = {}
        for plugin in self._permit:
            result, timeout = plugin.permit(state, pod, node_name)
            status = result or SUCCESS
            if status.is_success():
                continue
            if status.is_unschedulable():
                return Status(status.code, f'rejected by "{plugin.name}" at permit: {status.message}', plugin.name)
            if status.code is Code.WAIT:
                waits[plugin.name] = min(timeout, MAX_PERMIT_WAIT)
                continue
            return error(f'error while running "{plugin.name}" permit plugin for pod "{pod.key}": {status.message}', plugin.name)
        if not waits:
            return SUCCESS
        now = self.handle.now
        waiting = WaitingPod(pod, node_name, now, {name: now + timeout for name, timeout in waits.items()})
        self.handle._waiting[pod.uid] = waiting
        return Status(Code.WAIT, f"waiting at permit for {', '.join(sorted(waits))}")

    def run_reserve_and_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Reserve then Permit with the rollback rule: a failed Reserve runs no Unreserve;
        a Permit rejection runs Unreserve. Returns Success, Wait, Unschedulable or Error."""
        status = self.run_reserve_plugins(state, pod, node_name)
        if not status.is_success():
            return status
        status = self.run_permit_plugins(state, pod, node_name)
        if status.code not in (Code.SUCCESS, Code.WAIT):
            self.run_unreserve_plugins(state, pod, node_name)
        return status

    def expire_waiting(self, now: float) -> None:
        """Reject every waiting pod whose wait ran out by ``now``."""
        self.handle.now = now
        for waiting in self.handle.iterate_over_waiting_pods():
            waiting.expire(now)

    def take_resolved(self, state: CycleState | None = None) -> list[tuple[WaitingPod, Status]]:
        """Remove and return the waiting pods that have an outcome. Rejected ones have had
        Unreserve run, as the binding cycle does after a failed wait."""
        done: list[tuple[WaitingPod, Status]] = []
        for uid, waiting in list(self.handle._waiting.items()):
            if waiting.outcome is None:
                continue
            del self.handle._waiting[uid]
            outcome = waiting.outcome
            if not outcome.is_success():
                self.run_unreserve_plugins(state or CycleState(), waiting.pod, waiting.node_name)
                outcome = Status(outcome.code, f'pod "{waiting.pod.key}" rejected while waiting at permit: {outcome.message}', outcome.plugin)
            done.append((waiting, outcome))
        return done

    def run_pre_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for plugin in self._pre_bind:
            status = plugin.pre_bind(state, pod, node_name) or SUCCESS
            if not status.is_success():
                return error(f'error while running "{plugin.name}" prebind plugin for pod "{pod.key}": {status.message}', plugin.name)
        return SUCCESS

    def run_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """The first plugin that does not Skip decides; all skipping (or none) is Skip."""
        for plugin in self._bind:
            status = plugin.bind(state, pod, node_name) or SUCCESS
            if status.code is Code.SKIP:
                continue
            if not status.is_success():
                return error(f'plugin "{plugin.name}" failed to bind pod "{pod.key}": {status.message}', plugin.name)
            return SUCCESS
        return SKIP

    def run_post_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for plugin in self._post_bind:
            plugin.post_bind(state, pod, node_name)

    def run_binding_cycle(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """PreBind, Bind and PostBind for a pod that passed Permit; Unreserve on failure."""
        status = self.run_pre_bind_plugins(state, pod, node_name)
        if status.is_success():
            status = self.run_bind_plugins(state, pod, node_name)
        if status.code is Code.ERROR:
            self.run_unreserve_plugins(state, pod, node_name)
            return status
        self.run_post_bind_plugins(state, pod, node_name)
        return status


def _args_problem(plugin: str, exc: Exception) -> str:
    """What is wrong with a plugin's arguments, under the key path it was given at."""
    field = f".{exc.field}: {exc.problem}" if isinstance(exc, InvalidManifest) else f": {exc}"
    return f"pluginArgs.{plugin}{field}"
