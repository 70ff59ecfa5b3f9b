"""The status page: the ``/status`` document as one plain HTML page for people, refreshed by
the browser every few seconds (a meta refresh: no JavaScript). Pools against their limits,
why pods wait (grouped by reason), what the last decisions booted or stopped, what
disruption is doing or holding, and the nodes. Every value is escaped: pod and node names
come from the cluster."""

from __future__ import annotations

import time
from html import escape
from typing import Any

from nodemanager.status.summary import age, waiting_by_reason

REFRESH = 5  # seconds between the browser's reloads
MAX_NODES = 200  # node rows shown (/status has them all)
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.4em 0 .4em;border-bottom:1px solid #ccc}
table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
th{font-weight:600;color:#555}.bad{color:#b00020;font-weight:600}.ok{color:#1b5e20}.dim{color:#777}
meter{width:7em}td:first-child{white-space:nowrap}
"""


def render_page(doc: dict[str, Any]) -> str:
    controller = doc.get("controller", {})
    now = float(controller.get("now") or time.time())
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{REFRESH}">',
        f"<title>nodemanager {escape(str(controller.get('id', '')))}</title><style>{STYLE}</style></head><body>",
        _header(doc, controller, now),
        _pools(doc.get("pools", [])),
        _waiting(doc.get("pods", {}), now),
        _decisions(doc.get("decisions", []), now),
        _disruption(doc.get("disruption", {})),
        _nodes(doc.get("nodes", []), now),
        f'<p class="dim">Refreshed every {REFRESH} s. The whole document: <a href="status">/status</a>; metrics: <a href="metrics">/metrics</a>.</p>',
        "</body></html>",
    ]
    return "\n".join(parts)


def login_page(wrong: bool) -> str:
    """The form that asks for the status token (kept in an HttpOnly cookie afterwards)."""
    note = '<p class="bad">That token is not the one this service was given.</p>' if wrong else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>nodemanager: token</title>'
        f"<style>{STYLE}</style></head><body><h1>nodemanager</h1>{note}"
        '<form method="post" action="login"><label>Status token <input type="password" name="token" autofocus></label> '
        '<button type="submit">Show status</button></form>'
        '<p class="dim">The token of <code>status.bearerTokenFile</code> or <code>status.bearerTokenEnv</code>.</p></body></html>'
    )


def _header(doc: dict[str, Any], controller: dict[str, Any], now: float) -> str:
    ready = '<span class="ok">ready</span>' if controller.get("ready") else '<span class="bad">not ready</span>'
    role = "leader" if controller.get("leader", True) else "follower (another replica acts)"
    cost, bound = doc.get("cost_per_hour"), doc.get("bound_per_hour")
    against = f" against a bound of ${bound:,.2f}/h for the pods running" if bound else ""
    items = [ready, escape(role), f"fleet ${cost:,.2f}/h{against}" if cost is not None else ""]
    api = controller.get("api_server") or {}
    if api.get("unreachable_seconds"):
        items.append(f'<span class="bad">API server unreachable for {api["unreachable_seconds"]:.0f} s</span>')
    if controller.get("busy"):
        items.append('<span class="dim">(a long decision is running: this view is from a moment ago)</span>')
    title = f"nodemanager {escape(str(controller.get('version', '')))}: controller {escape(str(controller.get('id', '')))}"
    return f"<h1>{title}</h1><p>{' · '.join(i for i in items if i)} <span class='dim'>as of {_clock(now)}</span></p>"


def _pools(pools: list[dict[str, Any]]) -> str:
    rows = []
    for pool in pools:
        usage, limits = pool.get("usage", {}), pool.get("limits", {})
        cells = [f"<td>{escape(pool['name'])}</td><td>{escape(pool.get('packing', ''))}</td>"]
        for key in ("nodes", "cpu", "memory"):
            cells.append(f"<td>{_against(usage.get(key, 0), limits.get(key))}</td>")
        standby = pool.get("standby", {})
        cells.append(f"<td>{standby.get('present', 0)} of {standby.get('wanted', 0)}</td>")
        backoff = pool.get("backoff")
        cells.append(f'<td class="bad">paused: {escape(backoff.get("reason", ""))}</td>' if backoff else '<td class="ok">booting allowed</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return _section("Pools", ("Pool", "Packing", "Nodes", "vCPU", "Memory", "Standby", "Boots"), rows)


def _against(used: Any, limit: Any) -> str:
    """``used`` of ``limit`` with a meter, where there is a limit."""
    if limit is None:
        return escape(str(used))
    ratio = _number(used) / _number(limit) if _number(limit) else 1.0
    return f'{escape(str(used))} of {escape(str(limit))} <meter min="0" max="1" high="0.9" value="{min(ratio, 1.0):.3f}"></meter>'


def _number(quantity: Any) -> float:
    """``14``, ``30Gi`` or ``800Gi`` as a number of one unit, for a ratio of two of them."""
    text = str(quantity)
    for suffix, factor in (("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("Ti", 2**40)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    try:
        return float(text)
    except ValueError:
        return 0.0


def _waiting(pods: dict[str, Any], now: float) -> str:
    waiting = pods.get("waiting", [])
    counts = pods.get("counts", {})
    bound = counts.get("added", 0) + counts.get("assumed", 0)
    summary = f"<p>{counts.get('waiting', len(waiting))} waiting, {bound} bound, {counts.get('unschedulable', 0)} unschedulable</p>"
    rows = [
        f"<tr><td>{g.pods}</td><td>{age(g.oldest)}</td><td>{escape(g.reason)}</td><td class='dim'>{escape(g.example)}</td></tr>"
        for g in waiting_by_reason(waiting, now)
    ]
    return "<h2>Pods waiting for a node</h2>" + summary + (_table(("Pods", "Oldest", "Why", "For example"), rows) if rows else "")


def _decisions(decisions: list[dict[str, Any]], now: float) -> str:
    rows = []
    for d in reversed(decisions[-10:]):
        booted = ", ".join(f"{b['instance_type']} {b['capacity_type']} in {b['zone']} ({b['pool']}, {b['pods']} pod(s))" for b in d.get("booted", []))
        stopped = ", ".join(f"{s['node']}: {s['reason']}" for s in d.get("stopped", []))
        rows.append(f"<tr><td>{age(now - float(d['at']))} ago</td><td>{escape(booted) or '—'}</td><td>{escape(stopped) or '—'}</td></tr>")
    return _section("Last decisions", ("When", "Booted", "Stopped"), rows, empty="No boot or stop yet.")


def _disruption(disruption: dict[str, Any]) -> str:
    if not disruption:
        return ""
    text = f"<h2>Disruption</h2><p>{escape(str(disruption.get('state', '')))}</p>"
    held = disruption.get("held", {})
    blocked = disruption.get("blocked", {})
    rows = [f"<tr><td>{escape(n)}</td><td>held</td><td>{escape(why)}</td></tr>" for n, why in sorted(held.items())]
    rows += [f"<tr><td>{escape(n)}</td><td>blocked</td><td>{escape(why)}</td></tr>" for n, why in sorted(blocked.items())]
    recent = disruption.get("recent", [])
    if recent:
        text += f"<p>{len(recent)} recent action(s).</p>"
    return text + (_table(("Node", "", "Why"), rows) if rows else "")


def _nodes(nodes: list[dict[str, Any]], now: float) -> str:
    rows = []
    for n in nodes[:MAX_NODES]:
        state = escape(n.get("state", "")) + (" (cordoned)" if n.get("cordoned") else "")
        rows.append(
            f"<tr><td>{escape(n['name'])}</td><td>{escape(n['pool'])}</td><td>{escape(n['instance_type'])}</td><td>{escape(n['capacity_type'])}</td>"
            f"<td>{escape(n['zone'])}</td><td>{state}</td><td>{len(n.get('pods', []))}</td><td>{age(now - float(n['created_at']))}</td></tr>"
        )
    more = f"<p class='dim'>and {len(nodes) - MAX_NODES} more</p>" if len(nodes) > MAX_NODES else ""
    return _section(f"Nodes ({len(nodes)})", ("Node", "Pool", "Type", "Capacity", "Zone", "State", "Pods", "Age"), rows, empty="No nodes.") + more


def _section(title: str, header: tuple[str, ...], rows: list[str], empty: str = "") -> str:
    return f"<h2>{escape(title)}</h2>" + (_table(header, rows) if rows else f"<p class='dim'>{escape(empty)}</p>")


def _table(header: tuple[str, ...], rows: list[str]) -> str:
    return "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>" + "".join(rows) + "</table>"


def _clock(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))
