"""``nodemanager status``: a running service's ``/status`` document as tables for a person on
call, in the manner of ``kubectl get``: the service, its pools against their limits, why pods
wait (grouped by reason), its nodes, and what disruption is doing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodemanager.status.summary import age, waiting_by_reason

MAX_NODES = 50  # node rows shown; the rest are counted (-o json has them all)
MAX_REASON = 100  # characters of a waiting reason shown


def render(doc: dict[str, Any]) -> str:
    controller = doc.get("controller", {})
    now = float(controller.get("now") or 0.0)
    out = [_header(doc, controller), ""]
    out += _table(
        ("POOL", "PACKING", "NODES", "CPU", "MEMORY", "STANDBY", "BOOTS"),
        [_pool_row(p) for p in doc.get("pools", [])],
    )
    waiting = doc.get("pods", {}).get("waiting", [])
    counts = doc.get("pods", {}).get("counts", {})
    out += [
        "",
        f"PODS  waiting {counts.get('waiting', 0)}  bound {counts.get('added', 0) + counts.get('assumed', 0)}  unschedulable {counts.get('unschedulable', 0)}",
    ]
    if waiting:
        rows = [(str(g.pods), age(g.oldest), _clip(g.reason)) for g in waiting_by_reason(waiting, now)]
        out += _table(("WAITING", "OLDEST", "REASON"), rows)
    nodes = doc.get("nodes", [])
    out.append("")
    out += _table(
        ("NODE", "POOL", "TYPE", "CAPACITY", "ZONE", "STATE", "PODS", "AGE"),
        [
            (
                n["name"],
                n["pool"],
                n["instance_type"],
                n["capacity_type"],
                n["zone"],
                _state(n),
                str(len(n.get("pods", []))),
                age(now - float(n["created_at"])),
            )
            for n in nodes[:MAX_NODES]
        ],
    )
    if len(nodes) > MAX_NODES:
        out.append(f"... and {len(nodes) - MAX_NODES} more node(s) (-o json lists them all)")
    disruption = doc.get("disruption", {})
    if disruption:
        out += ["", f"DISRUPTION  {disruption.get('state', '')}"]
        held = disruption.get("held", {})
        out += _table(("HELD", "WHY"), [(name, _clip(why)) for name, why in sorted(held.items())]) if held else []
    return "\n".join(out) + "\n"


def _header(doc: dict[str, Any], controller: dict[str, Any]) -> str:
    ready = "ready" if controller.get("ready") else "NOT READY"
    role = "leader" if controller.get("leader", True) else "follower"
    parts = [f"nodemanager {controller.get('version', '?')}", f"controller {controller.get('id', '?')}", ready, role]
    cost, bound = doc.get("cost_per_hour"), doc.get("bound_per_hour")
    if cost is not None:
        parts.append(f"${cost:,.2f}/h" + (f" (bound ${bound:,.2f}/h)" if bound else ""))
    if controller.get("busy"):
        parts.append("(busy: this view is from a moment ago)")
    api = controller.get("api_server")
    if api and api.get("unreachable_seconds"):
        parts.append(f"API server unreachable for {api['unreachable_seconds']:.0f}s")
    return "  ".join(parts)


def _pool_row(pool: dict[str, Any]) -> tuple[str, ...]:
    usage, limits = pool.get("usage", {}), pool.get("limits", {})

    def against(key: str) -> str:
        limit = limits.get(key)
        return f"{usage.get(key, 0)}/{limit}" if limit is not None else str(usage.get(key, 0))

    standby = pool.get("standby", {})
    backoff = pool.get("backoff")
    return (
        pool["name"],
        pool.get("packing", ""),
        against("nodes"),
        against("cpu"),
        against("memory"),
        f"{standby.get('present', 0)}/{standby.get('wanted', 0)}",
        "paused" if backoff else "ok",
    )


def _node_row(node: dict[str, Any], now: float) -> tuple[str, ...]:
    old = age(now - float(node["created_at"]))
    return (node["name"], node["pool"], node["instance_type"], node["capacity_type"], node["zone"], _state(node), str(len(node.get("pods", []))), old)


def _state(node: dict[str, Any]) -> str:
    state = node.get("state", "")
    if node.get("cordoned"):
        state += ",Cordoned"
    if node.get("terminating"):
        state += ",Terminating"
    return state


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    return ["   ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip() for row in (header, *rows)]
