"""The termination labels of voluntary disruptions (metrics and drains), shared by the
disruption controller that marks nodes with them and the reaper that drains them: a drain
of these may wait for PodDisruptionBudgets however long they hold."""

from __future__ import annotations

from nodemanager.config.schema import DisruptionReason

LABELS = {DisruptionReason.UNDERUTILIZED: "consolidation", DisruptionReason.DRIFTED: "drifted", DisruptionReason.EXPIRED: "expired"}
VOLUNTARY = frozenset(LABELS.values())
