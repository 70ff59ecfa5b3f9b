"""``LeaderElector``: one acting controller among replicas, on a ``coordination.k8s.io/v1`` Lease.

It follows client-go's leader election:

* a candidate takes the Lease only when it has seen no change to it for ``lease_duration``
  by its own clock (never by comparing its clock with the holder's ``renewTime``);
* every write carries the Lease's resourceVersion, so of two candidates one gets 409;
* the leader renews every ``retry_period`` and stops acting once ``renew_deadline`` has
  passed since its last successful renewal began. As renew_deadline < lease_duration, a
  leader that cannot renew has stopped before anyone else may take over.

``tick()`` is one attempt (the service schedules it every retry_period); ``leading()``
is what the loops ask before they act.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.clock import Clock
from nodemanager.cluster.kubernetes.errors import NETWORK_ERRORS, api_message
from nodemanager.cluster.kubernetes.reachability import Reachability
from nodemanager.config.cluster_schema import LeaderElection
from nodemanager.deadline import API_CONNECT

log = logging.getLogger("nodemanager.leader")


def micro_time(t: float) -> str:
    """A MicroTime the API server accepts. The client turns it into a datetime and sends its
    isoformat, which drops the fraction on a whole second; the server then refuses the
    Lease (400). A whole second is moved on by one microsecond to keep the six digits."""
    stamp = datetime.fromtimestamp(t, UTC)
    if stamp.microsecond == 0:
        stamp = stamp.replace(microsecond=1)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Observed:
    holder: str
    resource_version: str
    duration: float


class LeaderElector:
    def __init__(
        self,
        api: client.ApiClient,
        settings: LeaderElection,
        identity: str,
        clock: Clock,
        *,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        reachability: Reachability | None = None,
    ) -> None:
        self.api = client.CoordinationV1Api(api)
        self.reachability = reachability or Reachability(clock)
        self.settings = settings
        self.identity = identity
        self.clock = clock
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.holder = ""  # who holds the lease, as last seen
        self.transitions = 0
        self._observed: Observed | None = None
        self._observed_at = float("-inf")  # our clock when the lease last changed
        self._renewed_at: float | None = None  # our clock when our last successful write began
        self._was_leading = False
        self._released = False
        self.problem: str | None = None  # a misconfiguration no retry can fix (said once, shown in /status)

    @property
    def _options(self) -> dict[str, Any]:
        """A Lease call's reply unparsed, waited for no longer than a renewal may take (client-go bounds it the same way)."""
        return {"_preload_content": False, "_request_timeout": (API_CONNECT, self.settings.renew_deadline)}

    def leading(self) -> bool:
        """True while this replica may act: its last renewal began under renew_deadline ago."""
        return self._renewed_at is not None and self.clock.now() - self._renewed_at < self.settings.renew_deadline

    def tick(self) -> bool:
        """One try to acquire or renew the lease; returns whether this replica leads now."""
        began = self.clock.now()
        answered = self.reachability.asking()
        try:
            ok = self._try(began)
        except NETWORK_ERRORS as exc:
            self.reachability.failed(f"lease {self.settings.namespace}/{self.settings.lease_name}", api_message(exc))
            ok = False
        else:
            answered()
        if ok:
            self._renewed_at = began
        self._notice()
        return self.leading()

    def _notice(self) -> None:
        now_leading = self.leading()
        if now_leading and not self._was_leading:
            log.info("leader election: %s became the leader (lease %s/%s)", self.identity, self.settings.namespace, self.settings.lease_name)
            self._was_leading = True
            if self.on_started:
                self.on_started()
        elif not now_leading and self._was_leading:
            if self._released:
                log.info("leader election: %s stopped leading (released the lease)", self.identity)
            else:
                log.warning("leader election: %s stopped leading (no renewal for %gs)", self.identity, self.settings.renew_deadline)
            self._was_leading = False
            self._renewed_at = None
            if self.on_stopped:
                self.on_stopped()

    def _try(self, now: float) -> bool:
        ns, name = self.settings.namespace, self.settings.lease_name
        try:
            lease = self.api.read_namespaced_lease(name, ns, **self._options)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create(now)
        self._say_problem(None)
        doc = _json(lease)
        spec = doc.get("spec") or {}
        observed = Observed(
            spec.get("holderIdentity") or "", doc["metadata"]["resourceVersion"], float(spec.get("leaseDurationSeconds") or self.settings.lease_duration)
        )
        if observed != self._observed:
            self._observed, self._observed_at = observed, now
        self.holder = observed.holder
        self.transitions = int(spec.get("leaseTransitions") or 0)
        mine = observed.holder == self.identity
        if not mine and observed.holder and now < self._observed_at + observed.duration:
            return False  # someone else holds it and it has not run out by our clock
        renewed = {
            **spec,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.settings.lease_duration),
            "renewTime": micro_time(now),
        }
        if not mine:
            renewed.update(acquireTime=micro_time(now), leaseTransitions=self.transitions + 1)
        try:
            reply = _json(self.api.replace_namespaced_lease(name, ns, self._lease(renewed, observed.resource_version), **self._options))
        except ApiException as exc:
            if exc.status == 409:
                log.info("leader election: lease %s/%s changed under us; trying again", ns, name)
                return False
            raise
        self._hold(reply, now)
        if not mine:
            self.transitions += 1
            log.info("leader election: took lease %s/%s from %r", ns, name, observed.holder or "nobody")
        return True

    def _create(self, now: float) -> bool:
        ns, name = self.settings.namespace, self.settings.lease_name
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.settings.lease_duration),
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": 0,
        }
        try:
            reply = _json(self.api.create_namespaced_lease(ns, self._lease(spec), **self._options))
        except ApiException as exc:
            if exc.status == 409:  # another replica created it first
                return False
            if exc.status == 404:  # the namespace is missing: no replica can ever lead
                self._say_problem(
                    f"cannot create lease {ns}/{name}: {api_message(exc)} (create the namespace, or set cluster.kubernetes.leaderElection.namespace)"
                )
                return False
            raise
        self._say_problem(None)
        self._hold(reply, now)
        log.info("leader election: created lease %s/%s", ns, name)
        return True

    def _say_problem(self, problem: str | None) -> None:
        if problem is not None and problem != self.problem:
            log.error("leader election: %s", problem)
        elif problem is None and self.problem is not None:
            log.info("leader election: the lease can be written again")
        self.problem = problem

    def _lease(self, spec: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
        """The Lease to write; with a resourceVersion, the write fails (409) if it changed."""
        metadata = {"name": self.settings.lease_name, "namespace": self.settings.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _hold(self, reply: dict[str, Any], now: float) -> None:
        """Our write was accepted: the lease is ours as of ``now``, at the reply's version."""
        self._observed = Observed(self.identity, reply["metadata"]["resourceVersion"], self.settings.lease_duration)
        self._observed_at, self.holder = now, self.identity

    def release(self) -> None:
        """On shutdown: give the lease up so a follower takes over at once."""
        if not self.leading() or self._observed is None:
            return
        ns, name = self.settings.namespace, self.settings.lease_name
        now = micro_time(self.clock.now())
        spec = {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now, "leaseTransitions": self.transitions}
        try:
            self.api.replace_namespaced_lease(name, ns, self._lease(spec, self._observed.resource_version), **self._options)
            log.info("leader election: released lease %s/%s", ns, name)
        except NETWORK_ERRORS as exc:
            log.warning("leader election: could not release the lease (it runs out by itself): %s", api_message(exc))
        self._renewed_at = None
        self._released = True
        self._notice()

    def describe(self) -> dict[str, Any]:
        return {
            "enabled": True,
            "leading": self.leading(),
            "identity": self.identity,
            "holder": self.holder,
            "problem": self.problem,
            "lease": f"{self.settings.namespace}/{self.settings.lease_name}",
        }


def _json(response: Any) -> dict:
    return json.loads(response.data)
