"""The ``nodemanager`` command. Exit status: 0 ok, 2 bad input or configuration, 1 runtime failure."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from nodemanager import __version__
from nodemanager.config import load_config
from nodemanager.errors import ConfigError, InvalidInput
from nodemanager.model import CapacityType, Resources

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
_FITS_ALIASES = {"gpu": "nvidia.com/gpu", "mem": "memory"}


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
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nodemanager", description="A cloud node-pool autoscaler.")
    parser.add_argument("--version", action="version", version=f"nodemanager {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)

    check = verbs.add_parser("check-config", help="validate a provider.yaml and list every problem")
    check.add_argument("path")
    check.set_defaults(handler=_check_config_command)

    catalog = verbs.add_parser("catalog", help="list instance types that fit a request, cheapest first")
    catalog.add_argument("--config", help="provider.yaml whose catalog settings to use (default: the embedded default)")
    catalog.add_argument("--fits", help="e.g. cpu=2,memory=8Gi,gpu=1")
    catalog.add_argument("--instance-types", nargs="*", help="names or globs, e.g. 'c5*' 'm5.*'")
    catalog.add_argument("--capacity-type", choices=[c.value for c in CapacityType])
    catalog.add_argument("--arch", nargs="*", choices=["x86_64", "arm64"])
    catalog.add_argument("--zone")
    catalog.add_argument("--limit", type=int, default=20)
    catalog.add_argument("--json", action="store_true")
    catalog.set_defaults(handler=_catalog_command)
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


if __name__ == "__main__":
    sys.exit(main())
