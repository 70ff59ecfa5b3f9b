"""Reading provider.yaml: parse, validate the shape, then check it against the catalog.

Every problem is reported, each as ``key.path: what is wrong`` (for example
``pools[1].standby[0].count: must be >= 0, got -2``), and nothing starts on a bad file.
"""

from __future__ import annotations

import copy
import ipaddress
import socket
import ssl
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from apscheduler.triggers.cron import CronTrigger
from pydantic import ValidationError

from cloud.aws.settings import ImageFamily
from cloud.catalog import Catalog
from cloud.spot_history import spot_history_file
from nodemanager import documents
from nodemanager.config.cloud_schema import CloudProvider
from nodemanager.config.files import load_token, status_tls
from nodemanager.config.prices import overridden, priced_offerings
from nodemanager.config.schema import HOSTNAME_MAX, NODE_NAME_DIGITS, Packing, ProviderConfig, Scheduling, parse_listen
from nodemanager.errors import ConfigError
from nodemanager.model import CapacityType
from nodemanager.noderesource import BatchResource
from nodemanager.scheduling import Framework, FrameworkConfigError

EMBEDDED_DEFAULT = "embedded default"
# Keys holding file paths, resolved against the directory of the provider.yaml.
_PATH_KEYS = (
    ("cluster", "simulated", "workload"),
    ("cluster", "kubernetes", "kubeconfig"),
    ("catalog", "file"),
    ("catalog", "spotPriceHistory"),
    ("status", "bearerTokenFile"),
    ("status", "tlsCertFile"),
    ("status", "tlsKeyFile"),
)
_SECRET_KEYS = frozenset({"userData"})
NODE_RESOURCE_PLUGINS = (BatchResource.name,)  # what colocation.plugins may name
REPAIR_ROUNDS = 4  # times refused keys are taken out to check the rest against the catalog


def embedded_default_path() -> Path:
    return Path(str(files("nodemanager") / "shipped" / "provider.yaml"))


def load_config(path: str | Path | None = None) -> tuple[ProviderConfig, Catalog]:
    """The validated configuration and its catalog; raises ``ConfigError`` listing every problem."""
    source = Path(path) if path is not None else embedded_default_path()
    label = str(path) if path is not None else f"{EMBEDDED_DEFAULT} ({source})"
    try:
        text = documents.read_text(source, documents.CONFIG_BYTES)
    except documents.DocumentProblem as exc:
        raise ConfigError(label, [str(exc)]) from None
    return parse_config(text, label, source.parent)


def parse_config(text: str, label: str, base_dir: Path) -> tuple[ProviderConfig, Catalog]:
    try:
        raw = documents.parse(text)
    except documents.DocumentProblem as exc:
        raise ConfigError(label, [str(exc)]) from None
    if not isinstance(raw, dict):
        raise ConfigError(label, [f"the document must be a mapping of settings, got {type(raw).__name__}"])
    _resolve_paths(raw, base_dir)
    try:
        config = ProviderConfig.model_validate(raw)
    except ValidationError as exc:
        # Every problem at once: the scheduling profile and the catalog checks too, as far
        # as the keys they read are valid.
        problems = format_validation_errors(exc.errors()) + _profile_problems(raw.get("scheduling")) + _problems_beyond_schema(raw, exc.errors())
        raise ConfigError(label, list(dict.fromkeys(problems))) from None
    try:
        catalog = _catalog_for(config)
    except KeyedProblem as exc:
        raise ConfigError(label, [str(exc)]) from None
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(label, [f"catalog: cannot load the instance catalog: {exc}"]) from None
    problems = check_against_catalog(config, catalog) + _kubeconfig_problems(config)
    if problems:
        raise ConfigError(label, problems)
    return config, catalog


def _kubeconfig_problems(config: ProviderConfig) -> list[str]:
    """A kubeconfig the file names must exist and load (its context too); read, not used:
    no connection is made."""
    kube = config.cluster.kubernetes
    if kube is None or kube.kubeconfig is None:
        return []
    if not Path(kube.kubeconfig).is_file():
        return [f"cluster.kubernetes.kubeconfig: no such file: {kube.kubeconfig}"]
    from kubernetes import client
    from kubernetes import config as kube_config

    try:
        kube_config.load_kube_config(config_file=kube.kubeconfig, context=kube.context, client_configuration=client.Configuration())
    except Exception as exc:  # the client's loader raises what its YAML parser and its own checks raise
        return [f"cluster.kubernetes.kubeconfig: {kube.kubeconfig}: {' '.join(str(exc).split())}"]
    return []


def _problems_beyond_schema(raw: dict[str, Any], errors: Sequence[Mapping[str, Any]]) -> list[str]:
    """The checks against the catalog, on the file with the keys the schema refused taken
    out (their defaults instead), so that one round reports every problem. What these checks
    find inside an object that had a key taken out is left out: it may come from a default.
    A required key missing, or a file that still fails after a few rounds of this: nothing."""
    repaired, suspect = copy.deepcopy(raw), set()
    for _ in range(REPAIR_ROUNDS):
        for error in errors:
            loc = _user_loc(error["loc"])
            items = [k for k, part in enumerate(loc) if isinstance(part, int)]
            if items:  # in an item of a list: the whole list goes (an item taken out would renumber the rest)
                loc = loc[: items[-1]]
            elif error["type"] == "missing":
                return []
            if not loc:
                return []
            parent: Any = repaired
            for part in loc[:-1]:
                parent = parent.get(part) if isinstance(parent, dict) else parent[part] if isinstance(parent, list) and part < len(parent) else None
            if isinstance(parent, dict):
                parent.pop(loc[-1], None)
            if len(loc) > 1:
                suspect.add(key_path(loc[:-1]))
        try:
            config = ProviderConfig.model_validate(repaired)
            catalog = _catalog_for(config)
        except ValidationError as exc:
            errors = exc.errors()
            continue
        except (OSError, ValueError, KeyError):
            return []
        return [p for p in check_against_catalog(config, catalog) if not any(p.startswith((f"{s}.", f"{s}:", f"{s}[")) for s in suspect)]
    return []


def _catalog_for(config: ProviderConfig) -> Catalog:
    settings = config.catalog
    if settings.file:
        listed = Catalog.from_file(Path(settings.file), settings.spot_price_fraction)
    else:
        listed = Catalog.bundled(settings.region, settings.spot_price_fraction)
    if config.nodes.prefix_delegation:
        listed = listed.with_prefix_delegation()
    if settings.spot_price_history:
        try:
            spot, newest = spot_history_file(Path(settings.spot_price_history))
        except (OSError, ValueError) as exc:
            raise KeyedProblem(f"catalog.spotPriceHistory: {exc}") from None
        when = f"newest {newest:%Y-%m-%d %H:%M} UTC" if newest else "empty"
        listed = listed.with_prices({}, spot, f"{listed.source}, spot prices of {settings.spot_price_history} ({len(spot)} offerings, {when})")
    return overridden(listed, settings.price_overrides)


class KeyedProblem(ValueError):
    """A problem with a setting's value found while loading what it names: its message
    begins with the key path."""


def _resolve_paths(raw: dict[str, Any], base_dir: Path) -> None:
    for keys in _PATH_KEYS:
        node: Any = raw
        for key in keys[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        value = node.get(keys[-1]) if isinstance(node, dict) else None
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            node[keys[-1]] = str((base_dir / value).resolve())


# --- messages ---------------------------------------------------------------------------


def key_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_PATTERN_NAMES = {
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a DNS label (lowercase letters, digits and '-')",
    r"^(\[[0-9a-fA-F:]+\]|[^:\s]+):[0-9]{1,5}$": "host:port",
    r"^[a-z]{2}(-[a-z]+)+-[0-9]$": "an AWS region such as us-east-1",
}


def _message(error: Mapping[str, Any]) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    got = f", got {value!r}"
    simple = {
        "missing": "required",
        "extra_forbidden": "unknown key",
        "greater_than_equal": f"must be >= {ctx.get('ge')}{got}",
        "greater_than": f"must be > {ctx.get('gt')}{got}",
        "less_than_equal": f"must be <= {ctx.get('le')}{got}",
        "less_than": f"must be < {ctx.get('lt')}{got}",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters{got}",
        "string_pattern_mismatch": f"expected {_PATTERN_NAMES.get(ctx.get('pattern', ''), 'a value matching ' + str(ctx.get('pattern')))}{got}",
        "enum": f"expected one of {ctx.get('expected')}{got}",
        "literal_error": f"expected {ctx.get('expected')}{got}",
        "int_parsing": f"expected an integer{got}",
        "int_type": f"expected an integer{got}",
        "int_from_float": f"expected an integer{got}",
        "float_parsing": f"expected a number{got}",
        "float_type": f"expected a number{got}",
        "bool_parsing": f"expected true or false{got}",
        "bool_type": f"expected true or false{got}",
        "string_type": f"expected a string{got}",
        "list_type": f"expected a list{got}",
        "dict_type": f"expected a mapping{got}",
        "model_type": f"expected a mapping{got}",
        "model_attributes_type": f"expected a mapping{got}",
    }
    if kind == "too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else f"needs at least {ctx.get('min_length')} items"
    if kind == "value_error":  # our own validators' messages, which say what they got
        return str(ctx.get("error", error.get("msg", "")))
    return simple.get(kind, f"{error.get('msg', kind)}{got}")


def _user_loc(loc: Sequence[int | str]) -> list[int | str]:
    """A pydantic error location as the user's key path: unions ("int | None") add the
    member's type to it, which users never wrote."""
    return [p for p in loc if isinstance(p, int) or (not any(c in p for c in "[(]") and p not in ("int", "str", "float", "bool"))]


def format_validation_errors(errors: Iterable[Mapping[str, Any]]) -> list[str]:
    """pydantic errors as ``key.path: message`` lines, secrets never echoed."""
    lines: list[str] = []
    for error in errors:
        loc = _user_loc(error["loc"])
        path = key_path(loc)
        message = _message(error)
        if _SECRET_KEYS & {p for p in loc if isinstance(p, str)} or error["type"] == "extra_forbidden":
            message = message.split(", got ")[0]
        lines.append(f"{path}: {message}" if path else message)
    # pydantic reports "int | None" twice (once per member); keep each line once.
    return list(dict.fromkeys(lines))


# --- checks against the catalog ---------------------------------------------------------


def _unknown_types(where: str, patterns: Sequence[str], catalog: Catalog) -> list[str]:
    return [
        f"{where}.instanceTypes[{j}]: {p!r} matches no instance type in the {catalog.region} catalog"
        for j, p in enumerate(patterns)
        if not catalog.matching([p])
    ]


def _unknown_zones(where: str, zones: Sequence[str], catalog: Catalog) -> list[str]:
    return [f"{where}.zones[{j}]: unknown zone {z!r}; {catalog.region} has {list(catalog.zones)}" for j, z in enumerate(zones) if z not in catalog.zones]


def _price_override_problems(config: ProviderConfig, catalog: Catalog) -> list[str]:
    """Each rule's globs and zones must name something the catalog has, and the rule must
    price some offering: a rule that prices nothing is a mistake, not a no-op."""
    problems = []
    for i, rule in enumerate(config.catalog.price_overrides):
        where = f"catalog.priceOverrides[{i}]"
        bad = _unknown_types(where, rule.instance_types, catalog) + _unknown_zones(where, rule.zones, catalog)
        if not bad and not priced_offerings(catalog, rule):
            sold = "/".join(c.value for c in rule.capacity_types) or "any capacity type"
            bad.append(f"{where}: prices no offering (no type it names is sold as {sold} in {', '.join(rule.zones) or 'any zone'})")
        problems += bad
    return problems


def check_against_catalog(config: ProviderConfig, catalog: Catalog) -> list[str]:
    """Problems that need the catalog (unknown types and zones) or span several keys."""
    problems = _price_override_problems(config, catalog)
    if config.nodes.default_instance_type not in catalog:
        problems.append(f"nodes.defaultInstanceType: unknown instance type {config.nodes.default_instance_type!r} (catalog {catalog.region})")
    seen: dict[str, int] = {}
    for i, pool in enumerate(config.pools):
        where = f"pools[{i}]"
        if pool.name in seen:
            problems.append(f"{where}.name: duplicate pool name {pool.name!r} (also pools[{seen[pool.name]}])")
        seen.setdefault(pool.name, i)
        if (length := len(config.nodes.name_tag) + len(pool.name) + NODE_NAME_DIGITS + 2) > HOSTNAME_MAX:
            problems.append(
                f"{where}.name: node names would be {length} characters ('{config.nodes.name_tag}-{pool.name}-' and {NODE_NAME_DIGITS} hex digits),"
                f" past the {HOSTNAME_MAX} of a kubernetes.io/hostname label: shorten the pool's name or nodes.nameTag"
            )
        problems += _unknown_types(where, pool.instance_types, catalog)
        allowed = catalog.matching(**pool.type_query())
        if catalog.matching(pool.instance_types) and not allowed:
            note = "" if pool.packing is Packing.CELL else " (burstable types a glob sweeps in are left out of bin-pack pools: name them)"
            problems.append(
                f"{where}: no instance type is left after instanceTypes, excludeInstanceTypes, architectures {pool.architectures} "
                f"and instanceGeneration {pool.instance_generation.value}{note}"
            )
        problems += _unknown_zones(where, pool.zones, catalog)
        for j, standby in enumerate(pool.standby):
            spath = f"{where}.standby[{j}]"
            itype = standby.instance_type or config.nodes.default_instance_type
            if itype not in catalog:
                problems.append(f"{spath}.instanceType: unknown instance type {itype!r}")
            elif itype not in allowed:
                problems.append(
                    f"{spath}.instanceType: {itype!r} is not allowed by the pool's instanceTypes {pool.instance_types} and architectures {pool.architectures}"
                )
            if standby.spot and CapacityType.SPOT not in pool.capacity_types:
                problems.append(f"{spath}.spot: the pool's capacityTypes {[c.value for c in pool.capacity_types]} do not include spot")
            if not standby.spot and CapacityType.ON_DEMAND not in pool.capacity_types:
                problems.append(f"{spath}.spot: false, but the pool's capacityTypes do not include on-demand")
            if standby.zone and pool.zones and standby.zone not in pool.zones:
                problems.append(f"{spath}.zone: {standby.zone!r} is not one of the pool's zones {pool.zones}")
    aws = config.cloud.aws if config.cloud.provider is CloudProvider.AWS else None
    if aws is not None:
        spec = config.nodes.boot_image_spec
        if not (spec.image_ids or spec.owners or spec.filters or spec.launch_template):
            problems.append("nodes.bootImageSpec: required with cloud.provider aws: give imageIDs, owners and filters, or launchTemplate")
        images = " ".join(name for values in spec.filters.values() for name in values).lower()
        script = aws.user_data.get_secret_value() if aws.user_data else ""
        if "al2023" in images and aws.image_family is ImageFamily.CUSTOM and "/etc/eks/bootstrap.sh" in script:
            problems.append(
                "cloud.aws.userData: calls /etc/eks/bootstrap.sh, but nodes.bootImageSpec selects AL2023 images, which join with nodeadm: "
                "set cloud.aws.imageFamily: AL2023 and cloud.aws.eks, and keep only your own steps in userData"
            )
        if catalog.region != aws.region:
            problems.append(
                f"catalog.region: the catalog is for {catalog.region} but cloud.aws.region is {aws.region}: "
                f"make one with `python -m cloud.catalog_gen --region {aws.region} --pricing-api` and set catalog.file"
            )
    problems += _profile_problems(config.scheduling)
    for i, pool in enumerate(config.pools):
        for k, budget in enumerate(pool.disruption.budgets):
            if budget.schedule is not None:
                try:
                    trigger = CronTrigger.from_crontab(budget.schedule, timezone="UTC")  # a well-kept cron parser
                except ValueError as exc:
                    problems.append(f"pools[{i}].disruption.budgets[{k}].schedule: not a cron schedule ({exc})")
                    continue
                if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
                    problems.append(f"pools[{i}].disruption.budgets[{k}].schedule: {budget.schedule!r} never fires (no such date)")
    workload = config.cluster.simulated.workload if config.cluster.simulated else None
    if workload and not Path(workload).is_file():
        problems.append(f"cluster.simulated.workload: no such file {workload!r}")
    for i, entry in enumerate(config.colocation.plugins):
        name = entry.removeprefix("-")
        if name != "*" and name not in NODE_RESOURCE_PLUGINS:
            problems.append(f"colocation.plugins[{i}]: unknown plugin {entry!r}; known: *, {', '.join(NODE_RESOURCE_PLUGINS)} (a leading - disables one)")
    status = config.status
    try:
        load_token(status)
    except ValueError as exc:
        problems.append(str(exc))
    try:
        status_tls(status)
    except (OSError, ssl.SSLError) as exc:
        problems.append(f"status.tlsCertFile: cannot serve TLS with {status.tls_cert_file!r} and key {status.tls_key_file!r}: {exc}")
    host = parse_listen(status.listen)[0]
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)  # as the server will, when it binds
    except (OSError, UnicodeError):
        problems.append(f"status.listen: {host} does not resolve to an address")
    if not _loopback(host) and not (status.bearer_token_file or status.bearer_token_env or status.allow_unauthenticated):
        problems.append(
            f"status.listen: {status.listen} is reachable beyond this host and no token guards it (anyone who reaches it reads the "
            "configuration, nodes and pods): set status.bearerTokenFile or status.bearerTokenEnv, or status.allowUnauthenticated: true"
        )
    return problems


def _profile_problems(scheduling: object) -> list[str]:
    """What the scheduling framework refuses in the profile (plugins, their arguments)."""
    try:
        settings = scheduling if isinstance(scheduling, Scheduling) else Scheduling.model_validate(scheduling or {})
        Framework(settings.profile())
    except ValidationError:
        return []  # already among the schema's errors
    except FrameworkConfigError as exc:
        return [f"scheduling.{line}" for line in exc.problems]
    return []


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere
