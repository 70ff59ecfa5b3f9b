"""The ``nodemanager`` command. Exit status: 0 ok, 2 bad input or configuration, 1 runtime failure."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import yaml
from tqdm import tqdm

from nodemanager import __version__
from nodemanager.cluster.workload import DEFAULT_MAX_PODS
from nodemanager.config import EMBEDDED_DEFAULT, embedded_default_path, load_config
from nodemanager.config.cloud_schema import CloudProvider, SimulatedCloud
from nodemanager.config.launch_schema import LaunchMethod, fleet_hindrance
from nodemanager.config.prices import priced_offerings
from nodemanager.config.schema import ProviderConfig
from nodemanager.cost_breakdown import LABELS
from nodemanager.errors import ConfigError, InvalidInput, NodeManagerError
from nodemanager.logs import setup_logging, simulated_time
from nodemanager.model import CapacityType, Resources

if TYPE_CHECKING:
    from nodemanager.simulator import Simulation

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
_FITS_ALIASES = {"gpu": "nvidia.com/gpu", "mem": "memory"}
# The bar counts steps of the pods' lives, which mean nothing to a user: a percentage, the
# wall time and the estimate left, and what the run is at (simulated time, pods, instances).
PROGRESS_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]{postfix}"  # (tqdm puts ", " before the postfix)


def parse_fits(text: str) -> Resources:
    """``cpu=2,memory=8Gi,gpu=1`` as a resource vector (``gpu`` means ``nvidia.com/gpu``)."""
    amounts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name or not value:
            raise InvalidInput(f"--fits: expected name=quantity pairs such as cpu=2,memory=8Gi, got {part!r}")
        amounts[_FITS_ALIASES.get(name, name)] = value
    return Resources.parse(amounts, "--fits")


def _catalog_command(args: argparse.Namespace) -> int:
    _, catalog = load_config(args.config)
    requests = parse_fits(args.fits) if args.fits else Resources()
    if args.zone and args.zone not in catalog.zones:
        raise InvalidInput(f"--zone: {args.zone!r} is not a zone of the {catalog.region} catalog ({', '.join(catalog.zones)})")
    for pattern in args.instance_types or ():
        if not catalog.matching([pattern]):
            raise InvalidInput(f"--instance-types: {pattern!r} matches no instance type of the {catalog.region} catalog")
    capacity = CapacityType(args.capacity_type) if args.capacity_type else None
    rows = []
    seen: set[tuple[str, str]] = set()
    for offering, itype in catalog.ranked(
        requests, allowed=args.instance_types or ("*",), architectures=args.arch or (), capacity_type=capacity, zone=args.zone
    ):
        if (itype.name, offering.capacity_type) in seen:  # one row per type and capacity type
            continue
        seen.add((itype.name, offering.capacity_type))
        rows.append((offering, itype))
        if len(rows) >= args.limit:
            break
    if args.json:
        out = [
            {
                "instance_type": t.name,
                "capacity_type": o.capacity_type.value,
                "price_per_hour": o.price,
                "vcpu": t.vcpu,
                "memory_mib": t.memory_mib,
                "gpus": [{"count": g.count, "model": g.model, "memory_mib": g.memory_mib} for g in t.gpus],
                "architectures": list(t.architectures),
                "allocatable": t.allocatable.to_quantities(),
            }
            for o, t in rows
        ]
        print(json.dumps(out, indent=2))
        return EXIT_OK
    header = ("TYPE", "CAPACITY", "$/HOUR", "VCPU", "MEMORY", "GPU", "ARCH", "ALLOCATABLE (cpu, memory, pods)")
    line = "{:<18} {:<10} {:>9} {:>5} {:>9} {:<16} {:<7} {}"
    print(line.format(*header))
    for o, t in rows:
        gpus = ",".join(f"{g.count}x{g.model}" for g in t.gpus) or "-"
        alloc = t.allocatable.to_quantities()
        memory = f"{t.memory_mib / 1024:.1f}Gi"
        allocatable = f"{alloc.get('cpu')}, {alloc.get('memory')}, {alloc.get('pods')}"
        print(line.format(t.name, o.capacity_type.value, f"{o.price:.4f}", t.vcpu, memory, gpus, "/".join(t.architectures), allocatable))
    if not rows:
        print("no instance type fits", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _check_config_command(args: argparse.Namespace) -> int:
    config, catalog = load_config(args.path)
    summary = f"cloud {config.cloud.provider.value}, cluster {config.cluster.source.value}"
    print(f"OK: {args.path}: {len(config.pools)} pool(s), {summary}, catalog {catalog.region} ({len(catalog)} instance types)")
    for i, rule in enumerate(config.catalog.price_overrides):
        priced = priced_offerings(catalog, rule)
        how = f"x {rule.multiplier:g}" if rule.multiplier is not None else f"${rule.price:g}/h"
        where = f"{'/'.join(c.value for c in rule.capacity_types) or 'every capacity type'}, {', '.join(rule.zones) or 'every zone'}"
        print(
            f"  price override {i}: {', '.join(rule.instance_types)} ({where}) {how}: {priced} offering(s) match" + (f"; {rule.reason}" if rule.reason else "")
        )
    aws = config.cloud.aws if config.cloud.provider is CloudProvider.AWS else None
    if aws is not None:
        family = aws.image_family.value if aws.image_family else "taken from the name of each image booted (Custom for an image not EKS-optimized)"
        how = "set" if "image_family" in aws.model_fields_set else "from nodes.bootImageSpec's name filter"
        print(f"  nodes join as image family {family}" + (f" ({how})" if aws.image_family else ""))
    for pool in config.pools:
        launch = pool.launch
        how = (
            f"one EC2 Fleet call per node offering up to {launch.max_offerings} offerings within {launch.price_tolerance:.0%} of the planned price "
            f"(on-demand {launch.on_demand_strategy.value}, spot {launch.spot_strategy.value})"
            if launch.method is LaunchMethod.FLEET
            else "one RunInstances call per node" + ("" if "method" in launch.model_fields_set else f" ({fleet_hindrance(*config.fleet_inputs())})")
        )
        wanted = launch.min_values
        if wanted.asked:
            counts = [f"{n} {what}" for n, what in ((wanted.instance_types, "instance types"), (wanted.families, "families")) if n]
            how += f"; minValues: at least {' and '.join(counts)} in every launch ({wanted.policy.value})"
        print(f"  pool {pool.name}: launched by {how}")
        if pool.capacity_reservations:
            terms = [
                t.id or ", ".join(f"{k}={v}" for k, v in sorted(t.tags.items())) + (f" (owner {t.owner_id})" if t.owner_id else "")
                for t in pool.capacity_reservations
            ]
            print(f"  pool {pool.name}: launches into capacity reservations first: {'; '.join(terms)} (read every {config.loops.reservations:g}s)")
    return EXIT_OK


def _run_command(args: argparse.Namespace) -> int:
    from nodemanager.service import run_service

    setup_logging(args.log_level, args.debug_logger)
    config, catalog = load_config(args.config)
    source = args.config or f"{EMBEDDED_DEFAULT} ({embedded_default_path()})"
    return run_service(config, catalog, source, args.config)


def _progress(simulation: Simulation, stream: TextIO) -> tuple[Callable[[float, float], None], Callable[[], None]]:
    """A progress bar (tqdm) over the pods' lives (``Simulation.work_done``), so its estimate
    of the time left follows the work and not the simulated clock (which a quiet stretch
    skips in no time), with the simulated time, the pods bound, the instances alive and the
    fleet's cost so far; refreshed at most twice a second of wall time. Returns the callback
    for ``Simulation.run`` and the function that closes the bar."""
    total = simulation.work_done()[1]
    bar = tqdm(total=max(total, 1), file=stream, desc="simulating", leave=False, dynamic_ncols=True, bar_format=PROGRESS_FORMAT)
    total_pods = simulation.total_pods
    shown = [0.0]

    def show(now: float, horizon: float) -> None:
        if time.monotonic() - shown[0] < 0.5:
            return
        shown[0] = time.monotonic()
        bar.n = min(simulation.work_done()[0], bar.total)
        bound, alive = len(simulation.cluster.first_bound), simulation.cloud.live_count()
        day, rest = divmod(int(now), 86400)
        clock = f"day {day + 1} {rest // 3600:02d}:{rest % 3600 // 60:02d}"
        bar.set_postfix_str(f"{clock} simulated, {bound:,}/{total_pods:,} pods bound, {alive:,} instances, ${simulation.fleet()[0]:,.2f}")

    return show, bar.close


def _simulate_command(args: argparse.Namespace) -> int:
    from nodemanager.cluster.workload import load_workload_file
    from nodemanager.durations import parse_duration
    from nodemanager.simulator import STALL_SECONDS, Simulation

    setup_logging(args.log_level, args.debug_logger)
    configs = args.compare or ([args.config] if args.config else [])
    if not configs:
        raise InvalidInput("simulate: give --config provider.yaml, or --compare a.yaml b.yaml ...")
    if args.config and args.compare:
        raise InvalidInput("simulate: give --config or --compare, not both")
    if args.plot and not Path(args.plot).resolve().parent.is_dir():
        raise InvalidInput(f"--plot: no such directory for {args.plot!r}")
    loaded = [(path, *load_config(path)) for path in configs]  # every config checked before anything runs
    if args.spot_interruptions is not None:
        if not 0 <= args.spot_interruptions <= 100 or args.spot_interruptions != args.spot_interruptions:
            raise InvalidInput(f"--spot-interruptions: a rate per spot instance per hour from 0 to 100, got {args.spot_interruptions}")
        loaded = [(path, with_spot_interruptions(config, args.spot_interruptions), catalog) for path, config, catalog in loaded]
    try:
        until = parse_duration(args.until) if args.until else None
    except ValueError as exc:
        raise InvalidInput(f"--until: {exc}") from None
    loaded_workload = load_workload_file(args.workload, args.max_pods)
    workload = loaded_workload.arrivals
    late, first = workload.after(until) if until is not None else (0, None)
    if first is not None:
        raise InvalidInput(f"{args.workload}: {late} pod(s) arrive after --until {args.until}, e.g. {first.pod.key} at {first.at:g}s")
    devices, objects = loaded_workload.devices, loaded_workload.objects
    reports, simulations = [], []
    for path, config, catalog in loaded:
        simulation = Simulation(config, catalog, workload, devices, objects, timeline=bool(args.plot), clairvoyant=not args.no_clairvoyant)
        simulations.append(simulation)
        with simulated_time(simulation.clock.now):  # log lines say when in the run they happened
            if sys.stderr.isatty() and not args.quiet:
                show, close = _progress(simulation, sys.stderr)
                try:
                    reports.append((path, simulation.run(until=until, progress=show)))
                finally:
                    close()
            else:
                reports.append((path, simulation.run(until=until)))
    if args.compare:
        if args.json:
            print(json.dumps([{"config": path, "report": report} for path, report in reports], indent=2))
        else:
            _print_comparison(reports)
    elif args.json:
        print(json.dumps(reports[0][1], indent=2))
    else:
        _print_report(reports[0][1])
    if args.plot:
        from nodemanager.plot import PlotUnavailable, plot, plot_compare

        try:
            if args.compare:
                runs = [(Path(path).name, s.timeline) for path, s in zip(configs, simulations, strict=True) if s.timeline is not None]
                plot_compare(runs, Path(args.plot), f"{Path(args.workload).name} on {len(runs)} configurations")
            else:
                assert simulation.timeline is not None  # asked for with --plot
                breakdown = reports[0][1]["cost"]["breakdown"]  # type: ignore[index]
                plot(simulation.timeline, loaded[0][1], Path(args.plot), f"{Path(args.workload).name} on {Path(args.config).name}", breakdown)
        except PlotUnavailable as exc:
            raise InvalidInput(str(exc)) from None
        except OSError as exc:
            raise InvalidInput(f"--plot: cannot write {args.plot!r}: {exc.strerror or exc}") from None
    stalled = [(path, r) for path, r in reports if r["ended"] == "stalled"]
    for path, report in stalled:
        unfinished = report["pods"]["unfinished"]  # type: ignore[index]
        print(
            f"error: {path}: {len(unfinished)} pod(s) still waiting and nothing left that could place them "
            f"(no progress for {STALL_SECONDS / 3600:g}h of simulated time); see pods.unfinished",
            file=sys.stderr,
        )
    return EXIT_FAILURE if stalled else EXIT_OK


def with_spot_interruptions(config: ProviderConfig, rate: float) -> ProviderConfig:
    """``config`` simulated with spot instances reclaimed at ``rate`` per hour each."""
    simulated = (config.cloud.simulated or SimulatedCloud()).model_copy(update={"spot_interruption_per_hour": rate})
    return config.model_copy(update={"cloud": config.cloud.model_copy(update={"simulated": simulated})})


def _print_comparison(reports: list[tuple[str, dict]]) -> None:  # type: ignore[type-arg]
    """One row per configuration, the same workload."""
    header = ("CONFIG", "ENDED", "BOUND", "UNSCHED", "WAITING", "WAIT P50", "WAIT P95", "BOOTED", "PEAK", "DISRUPT", "EVICTED", "REDONE H")
    header += ("COST $", "BOUND $", "RATIO", "MOST WAITING ON")
    line = "{:<28} {:<8} {:>6} {:>7} {:>7} {:>9} {:>9} {:>7} {:>5} {:>7} {:>7} {:>8} {:>11} {:>11} {:>6}  {}"
    print(line.format(*header))
    for path, r in reports:
        pods, nodes, cost = r["pods"], r["nodes"], r["cost"]
        ratio = f"{cost['usd'] / cost['lower_bound_usd']:.2f}" if cost["lower_bound_usd"] else "-"
        wait = pods["pending_seconds"]
        row = (path[-28:], r["ended"], pods["bound"], pods["unschedulable"], len(pods["unfinished"]), f"{wait['p50']:.1f}s", f"{wait['p95']:.1f}s")
        disrupted, evicted = sum(d["nodes"] for d in r["disruption"].values()), pods["evicted"]
        fleet = (nodes["booted"], nodes["peak"], disrupted, evicted["count"], f"{evicted['work_redone_hours']:.1f}")
        causes = pods["waits_by_cause"]
        top = next(iter(causes), "-")
        most = f"{top} ({causes[top]['share']:.0%})" if top in causes else top
        print(line.format(*row, *fleet, f"{cost['usd']:.4f}", f"{cost['lower_bound_usd']:.4f}", ratio, most))


def _print_report(r: dict) -> None:  # type: ignore[type-arg]
    pods, nodes, cost, util, dec = r["pods"], r["nodes"], r["cost"], r["utilization"], r["decisions"]
    wait = pods["pending_seconds"]
    print(f"simulated {r['simulated_seconds']:.0f}s")
    print(f"pods:        {pods['total']} total, {pods['bound']} bound, {pods['unschedulable']} unschedulable")
    print(f"             waited p50 {wait['p50']:.1f}s, p95 {wait['p95']:.1f}s, max {wait['max']:.1f}s")
    for cause, w in pods["waits_by_cause"].items():
        who = f" ({w['pods']} pod(s))" if "pods" in w else ""
        print(f"             {w['share']:6.1%} of the waiting: {cause}{who}, {w['pod_hours']:.2f} pod-hours")
    launches = (
        f", {nodes['launch_failures']} launch(es) failed, {nodes['launch_fallbacks']} fell back to another offering"
        if nodes["launch_failures"] or nodes["launch_fallbacks"]
        else ""
    )
    print(f"nodes:       {nodes['booted']} booted, {nodes['terminated']} terminated, peak {nodes['peak']}{launches}")
    for itype, n in nodes["by_instance_type"].items():
        print(f"             {n:5d} x {itype}")
    print(f"cost:        ${cost['usd']:.4f} (LP lower bound ${cost['lower_bound_usd']:.4f}), ${cost['per_hour']:.4f}/h on average")
    if cost["clairvoyant_usd"] is not None:
        print(f"             a clairvoyant fleet (knowing every arrival and duration, booting at once, never idle): ${cost['clairvoyant_usd']:.4f}")
    for pool, c in cost["by_pool"].items():
        print(f"             ${c['usd']:.4f} in pool {pool}, ${c['per_hour']:.4f}/h")
    print("where it went:")
    for part, usd in cost["breakdown"].items():
        if usd or part != "refunded":
            share = f"{usd / cost['usd']:6.1%}" if cost["usd"] else "     -"
            print(f"             {f'${usd:.4f}':>11} {share}  {LABELS[part]}")
    prices = r["prices"]
    print(f"prices:      {prices['catalog']}; spot {prices['spot']}; {prices['spot_interruptions_per_hour']:g} spot interruptions/hour")
    for res in r.get("reservations", []):
        used = f"{res['launched']} launched, {res['instance_hours']:.1f} instance-hours, ${res['usd']:.4f}" if res["selected"] else "no pool selects it"
        print(f"reservation: {res['id']} ({res['count']} {res['instance_type']} in {res['zone']}, {res['type']}): {used}")
    print(f"utilization: cpu {util['cpu']:.1%}, memory {util['memory']:.1%} (requested / allocatable)")
    for reason, d in r["disruption"].items():
        print(f"disruption:  {reason}: {d['nodes']} node(s), {d['pods']} pod(s) moved, ${d['savings_per_hour']:.4f}/h saved when acted")
    if r["consolidation_rejected"]:
        turned = ", ".join(f"{why} {n}" for why, n in r["consolidation_rejected"].items())
        print(f"             consolidations turned down: {turned}")
    evicted = pods["evicted"]
    if evicted["count"]:
        again = evicted["pending_seconds"]
        print(
            f"evicted:     {evicted['count']} eviction(s) of {evicted['pods']} pod(s) (at most {evicted['max_per_pod']} of one), "
            f"{evicted['work_redone_hours']:.2f} pod-hours of work done again; "
            f"waited again p50 {again['p50']:.1f}s, p95 {again['p95']:.1f}s, max {again['max']:.1f}s"
        )
    print(f"decisions:   {dec['count']}, compute p50 {dec['compute_ms']['p50']:.2f}ms, p99 {dec['compute_ms']['p99']:.2f}ms")
    for item in r["unschedulable"]:
        print(f"unschedulable: {item['pod']}: {item['reason']}")
    if pods["running"]:
        print(f"running:     {pods['running']} pod(s) still running at the end (no duration, or cut by --until); the cost covers the time until then")
    for item in pods["unfinished"]:
        print(f"unfinished:  {item['pod']}: {item['reason']}")
    print(f"ended:       {r['ended']}" + (f" ({r['unsettled']})" if r["ended"] == "unsettled" else ""))


def _logging_arguments(command: argparse.ArgumentParser, default: str) -> None:
    command.add_argument("--log-level", default=default, choices=["debug", "info", "warning", "error"])
    command.add_argument(
        "--debug-logger",
        action="append",
        default=[],
        metavar="NAME",
        help="let a library's logger (botocore, urllib3, kubernetes, ...) log at --log-level; credentials are redacted still",
    )


TOKEN_ENV = "NODEMANAGER_STATUS_TOKEN"  # the shipped manifests' name for the status token
STATUS_TIMEOUT = 10.0  # seconds to wait for /status


def _status_source(args: argparse.Namespace) -> tuple[str, str | None]:
    """The endpoint's /status URL and the token to send: from --url, or the service's own
    provider.yaml (its status.listen, TLS and token); the token variable overrides."""
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if args.url:
        return args.url.rstrip("/") + "/status", token
    if args.config is None:
        return "http://127.0.0.1:8080/status", token
    from nodemanager.config.files import load_token
    from nodemanager.config.schema import parse_listen

    config, _ = load_config(args.config)
    host, port = parse_listen(config.status.listen)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    scheme = "https" if config.status.tls_cert_file else "http"
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}/status", token or load_token(config.status)


def _fetch_status(url: str, token: str | None) -> dict[str, object]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=STATUS_TIMEOUT) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        hint = f": set {TOKEN_ENV} or give --config" if exc.code == 401 else ""
        raise OSError(f"{url} answered {exc.code} {exc.reason}{hint}") from None
    except urllib.error.URLError as exc:
        raise OSError(f"cannot reach {url}: {exc.reason} (is the service running? --url or --config say where)") from None


def _status_command(args: argparse.Namespace, out: TextIO | None = None, rounds: int | None = None) -> int:
    from nodemanager.status.terminal import render

    out = out or sys.stdout

    url, token = _status_source(args)
    shown = 0
    while True:
        doc = _fetch_status(url, token)
        if args.output == "json":
            text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
        elif args.output == "yaml":
            text = yaml.safe_dump(doc, sort_keys=True)
        else:
            text = render(doc)
        if args.watch and out.isatty():
            out.write("\x1b[H\x1b[2J")  # clear the screen, as watch(1) does
        out.write(text)
        out.flush()
        shown += 1
        if not args.watch or (rounds is not None and shown >= rounds):
            return EXIT_OK
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nodemanager", description="A cloud node-pool autoscaler.")
    parser.add_argument("--version", action="version", version=f"nodemanager {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)

    run = verbs.add_parser("run", help="run the service (default: the embedded demo configuration)")
    run.add_argument("--config", help="provider.yaml (default: the embedded default: simulated cloud and cluster)")
    _logging_arguments(run, default="info")
    run.set_defaults(handler=_run_command)

    sim = verbs.add_parser("simulate", help="play a workload against a provider.yaml in virtual time")
    sim.add_argument("--config", help="provider.yaml whose pools and settings to simulate")
    sim.add_argument("--compare", nargs="+", metavar="CONFIG", help="play the workload against each provider.yaml and print one row per configuration")
    sim.add_argument("--workload", required=True, help="workload file (YAML or JSON)")
    sim.add_argument("--until", help="stop after this much simulated time (e.g. 24h); default: until every pod finished, runs for good or cannot run")
    sim.add_argument("--json", action="store_true", help="print the report as one JSON object")
    sim.add_argument("--quiet", action="store_true", help="no progress bar on a terminal")
    sim.add_argument(
        "--no-clairvoyant", action="store_true", help="leave out the clairvoyant fleet's cost (cost.clairvoyant_usd: null), a few seconds per 10,000 pods"
    )
    sim.add_argument("--plot", metavar="FILE.png", help="draw nodes by instance type, pods waiting and the cost rate against the bound's (needs matplotlib)")
    sim.add_argument(
        "--spot-interruptions",
        type=float,
        metavar="RATE",
        help="chance per hour that EC2 reclaims a running spot instance (with two minutes' warning); default: cloud.simulated.spotInterruptionPerHour, 0",
    )
    sim.add_argument("--max-pods", type=int, default=DEFAULT_MAX_PODS, help=f"refuse workloads of more pods than this (default {DEFAULT_MAX_PODS:,})")
    _logging_arguments(sim, default="warning")
    sim.set_defaults(handler=_simulate_command)

    check = verbs.add_parser("check-config", help="validate a provider.yaml and list every problem")
    check.add_argument("path")
    check.set_defaults(handler=_check_config_command)

    catalog = verbs.add_parser("catalog", help="list instance types that fit a request, cheapest first")
    catalog.add_argument("--config", help="provider.yaml whose catalog settings to use (default: the embedded default)")
    catalog.add_argument("--fits", help="e.g. cpu=2,memory=8Gi,gpu=1")
    catalog.add_argument("--instance-types", nargs="*", help="names or globs, e.g. 'c5*' 'm5.*'")
    catalog.add_argument("--capacity-type", choices=[c.value for c in CapacityType if c is not CapacityType.RESERVED])  # (reservations: read live)
    catalog.add_argument("--arch", nargs="*", choices=["x86_64", "arm64"])
    catalog.add_argument("--zone")
    catalog.add_argument("--limit", type=int, default=20)
    catalog.add_argument("--json", action="store_true")
    catalog.set_defaults(handler=_catalog_command)

    status = verbs.add_parser("status", help="show a running service's pools, waiting pods, nodes and disruption as tables")
    status.add_argument("--url", help="the service's status endpoint (default: http://127.0.0.1:8080, or where --config says)")
    status.add_argument("--config", help="the service's provider.yaml: its status.listen, TLS and bearer token")
    status.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table", help="tables (default), or the whole /status document")
    status.add_argument("-w", "--watch", type=float, nargs="?", const=2.0, metavar="SECONDS", help="show it again every SECONDS (default 2) until Ctrl-C")
    status.set_defaults(handler=_status_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except ConfigError as exc:
        print(f"configuration error in {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except InvalidInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, ValueError, NodeManagerError) as exc:  # the status port is taken, the cloud refused us...
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
