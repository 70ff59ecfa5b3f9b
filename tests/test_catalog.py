import fnmatch
import json

import pytest

from cloud import catalog_gen
from cloud.catalog import Catalog
from nodemanager.model import CapacityType, InstanceType, Resources

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT


def r(**q):
    return Resources.parse({k.replace("_", "/") if k == "nvidia_gpu" else k: v for k, v in q.items()})


def test_bundled_catalog_is_complete_and_dated(catalog):
    assert len(catalog) > 1200
    assert catalog.zones == ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f")
    assert "generated" in catalog.source
    p4d = catalog["p4d.24xlarge"]
    assert (p4d.gpu_count, p4d.gpus[0].model, p4d.gpus[0].memory_mib) == (8, "A100", 40960)
    m5 = catalog["m5.large"]
    assert (m5.vcpu, m5.memory_mib, m5.max_pods, m5.on_demand_price) == (2, 8192, 29, 0.096)
    assert m5.spot_price == pytest.approx(0.096 * 0.4)


@pytest.mark.parametrize(
    ("requests", "kwargs", "expected"),
    [
        pytest.param(r(cpu="500m", memory="512Mi"), {"allowed": ["c5*"], "capacity_type": OD}, "c5a.large", id="glob-c5"),
        # 32 vCPU types cannot hold 32 cores once kube-reserved is taken off
        pytest.param(r(cpu="32", memory="15Gi"), {"allowed": ["m5.*"], "capacity_type": OD}, "m5.12xlarge", id="glob-m5-allocatable-aware"),
        pytest.param(r(cpu="1", memory="2Gi"), {"allowed": ["t3*"], "capacity_type": OD}, "t3a.medium", id="small-memory-needs-medium"),
        pytest.param(
            Resources.parse({"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": 1}), {"capacity_type": OD, "architectures": ["x86_64"]}, "g4dn.xlarge", id="gpu"
        ),
        pytest.param(r(cpu="48", memory="180Gi"), {"capacity_type": OD, "architectures": ["x86_64"]}, "m5a.16xlarge", id="large-x86"),
    ],
)
def test_cheapest_fitting_golden(catalog, requests, kwargs, expected):
    offering = catalog.cheapest_fitting(requests, **kwargs)
    assert offering is not None
    assert offering.instance_type == expected
    # and nothing cheaper fits: checked against a brute-force scan
    names = catalog.matching(kwargs.get("allowed", ["*"]), kwargs.get("architectures", ()))
    cheapest = min(t.on_demand_price for t in catalog if t.name in names and requests.fits(t.allocatable))
    assert offering.price == cheapest


def test_back_pressure_moves_to_next_offering(catalog):
    req = r(cpu="1", memory="2Gi")
    first = catalog.cheapest_fitting(req, allowed=["t3*"], capacity_type=OD)
    excluded = {(first.instance_type, OD, z) for z in catalog.zones}
    second = catalog.cheapest_fitting(req, allowed=["t3*"], capacity_type=OD, exclude=excluded)
    assert first.instance_type == "t3a.medium"
    assert second.instance_type == "t3.medium"
    # excluding one zone only moves to the same type in the next zone
    same = catalog.cheapest_fitting(req, allowed=["t3*"], capacity_type=OD, exclude={first.key})
    assert (same.instance_type, same.zone) == ("t3a.medium", "us-east-1b")


def test_spot_zone_and_nothing_fits(catalog):
    spot = catalog.cheapest_fitting(r(cpu="2"), capacity_type=SPOT, zone="us-east-1c", architectures=["x86_64"])
    assert (spot.capacity_type, spot.zone) == (SPOT, "us-east-1c")
    assert catalog.cheapest_fitting(r(cpu="100000")) is None
    assert catalog.cheapest_fitting(r(cpu="1"), allowed=["nonexistent*"]) is None


def test_ties_are_broken_deterministically():
    twins = [InstanceType(name, 2, 4096, 0.1, zones=("z1", "z2")) for name in ("b.large", "a.large", "c.large")]
    bigger = InstanceType("a.xlarge", 4, 8192, 0.1, zones=("z1",))
    cat = Catalog([bigger, *twins])
    order = [str(o) for o, _ in cat.ranked(Resources({"cpu": 100}))]
    assert order[:3] == ["a.large/on-demand/z1", "a.large/on-demand/z2", "b.large/on-demand/z1"]
    assert order[-1] == "a.xlarge/on-demand/z1"  # same price, bigger machine last
    assert Catalog(reversed([bigger, *twins])).cheapest_fitting(Resources({"cpu": 100})) == cat.cheapest_fitting(Resources({"cpu": 100}))


def test_lookup_by_name_and_glob(catalog):
    assert catalog.get("m5.large") is catalog["m5.large"]
    assert catalog.get("m5.nope") is None
    assert "m5.large" in catalog.matching(["m5.*"])
    assert "m5a.large" not in catalog.matching(["m5.*"])
    assert all(n.startswith("c5") for n in catalog.matching(["c5*"]))
    assert "m6g.large" not in catalog.matching(["m6*"], ["x86_64"])


def test_exact_names_and_globs_select_as_fnmatch_does(catalog):
    """Exact names are looked up rather than matched; the selection is fnmatch's, listed
    types, globs and exclusions mixed (a hundred names, as a pool built from a list gives)."""
    names = sorted(n for n in catalog.matching(["*"]))
    listed = names[::13]
    cases = [
        (listed, ()),
        ([*listed, "c5*", "m6?.large", "[rx]6i.*"], ()),
        ([*listed, "m5.*"], ["m5.large", "c*"]),
        (["*"], [*listed[:40], "t*"]),
        (["m5.large", "no-such.type"], ()),
    ]
    for patterns, exclude in cases:
        expected = {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns) and not any(fnmatch.fnmatchcase(n, p) for p in exclude)}
        assert catalog.matching(patterns, (), exclude) == expected


def test_generator_builds_from_ec2_apis_and_prices(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,on_demand_usd_per_hour\nm5.large,0.096000\ng5.xlarge,1.006000\nnot.real,1.0\n")
    out = tmp_path / "cat.json"
    assert catalog_gen.main(["--moto", "--prices", str(prices), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["region"] == "us-east-1"
    assert "moto" in data["sources"]["specs"]
    by_name = {e["name"]: e for e in data["instance_types"]}
    assert set(by_name) == {"m5.large", "g5.xlarge"}  # unpriced types and unknown names are dropped
    assert by_name["m5.large"]["max_pods"] == 29
    assert by_name["g5.xlarge"]["gpus"] == [{"count": 1, "manufacturer": "NVIDIA", "model": "A10G", "memory_mib": 22888}]
    assert "us-east-1a" in by_name["m5.large"]["zones"]
    loaded = Catalog.from_file(out, spot_price_fraction=0.5)
    assert loaded["g5.xlarge"].spot_price == pytest.approx(0.503)


def test_unknown_region_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no bundled catalog for region 'mars-1'"):
        Catalog.bundled("mars-1")


@pytest.mark.parametrize(
    ("patterns", "kw", "inside", "outside"),
    [
        (["*"], {"generation": "current"}, {"m6i.large", "t3.micro"}, {"m1.small", "m3.large", "t1.micro"}),
        (["m1.small", "*"], {"generation": "current"}, {"m1.small", "m6i.large"}, {"m3.large"}),  # named: allowed
        (["m3.*"], {"generation": "current"}, {"m3.large"}, {"m6i.large"}),  # a glob that begins with the family names it
        (["*.large"], {"generation": "current"}, {"m6i.large"}, {"m3.large"}),  # one that begins with a wildcard does not
        (["*"], {"generation": "previous"}, {"m1.small", "r3.large"}, {"m6i.large"}),
        (["*"], {"generation": "any"}, {"m1.small", "m6i.large"}, set()),
        (["*"], {"burstable": False}, {"m6i.large"}, {"t3.micro", "t3a.large"}),
        (["t3.*", "m6i.*"], {"burstable": False}, {"t3.micro", "m6i.large"}, {"t3a.large"}),
    ],
)
def test_generation_and_burstable_filters_leave_named_types_alone(patterns, kw, inside, outside) -> None:
    """Types a glob sweeps in must be of the pool's generation and, in bin-pack pools, not
    burstable; a pattern that names a type (its name or a prefix of it) allows it."""
    names = Catalog.bundled().matching(patterns, **kw)
    assert inside <= names
    assert not outside & names


def test_a_catalog_entry_may_say_its_generation_else_its_family_decides(tmp_path) -> None:
    path = tmp_path / "catalog.json"
    entry = {"vcpu": 2, "memory_mib": 4096, "on_demand_price": 0.1, "zones": ["z-1a"]}
    path.write_text(
        '{"region": "z-1", "instance_types": ['
        + ", ".join(
            json.dumps({**entry, "name": n, **extra})
            for n, extra in [("m1.small", {}), ("m6i.large", {}), ("m6i.xlarge", {"current_generation": False}), ("m3.large", {"current_generation": True})]
        )
        + "]}"
    )
    catalog = Catalog.from_file(path)
    assert {t.name: t.current_generation for t in catalog} == {"m1.small": False, "m6i.large": True, "m6i.xlarge": False, "m3.large": True}


def test_a_bin_pack_pool_over_the_whole_catalog_buys_neither_previous_generation_nor_burstable_types() -> None:
    """With the whole catalog, 1,000 small pods once got 22 m1.small (previous generation:
    often no current image or network driver) and burstable types whose price holds only
    under the CPU-credit baseline."""
    import random

    from nodemanager.config.schema import InstanceGeneration, NodeDefaults, Pool
    from nodemanager.model import Pod
    from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings

    catalog = Catalog.bundled()
    rng = random.Random(7)
    shapes = [Resources({"cpu": rng.choice([50, 100, 250]), "memory": rng.choice([64, 128, 512]) << 20}) for _ in range(300)]
    pods = tuple(Pod("default", f"p{i}", f"u{i}", r) for i, r in enumerate(shapes))

    def bought(pool: Pool) -> set[str]:
        scaler = BindingNodeScaler(ScalerSettings((pool,), NodeDefaults(default_instance_type="m6i.large", max_boots_per_loop=1000)), catalog)
        return {spec.instance_type for spec in scaler.compute(ClusterSnapshot(pods, ()), 0.0).start}

    types = bought(Pool(name="general"))
    assert types
    assert all(catalog[t].current_generation and not catalog[t].burstable for t in types), types
    anything = bought(Pool(name="general", instance_generation=InstanceGeneration.ANY, packing="cell"))
    assert any(not catalog[t].current_generation or catalog[t].burstable for t in anything)  # what the filters keep out


def test_hourly_prices_are_the_offerings_own_however_many_are_asked_for(catalog, monkeypatch):
    """``hourly`` keeps the prices it was asked for, a bounded number of them."""
    import cloud.catalog as module

    monkeypatch.setattr(module, "HOURLY_KEPT", 7)
    offerings = [(t.name, o.capacity_type, o.zone, o.price) for t in list(catalog)[:40] for o in t.offerings]
    for _ in range(2):  # the second round is answered from what was kept, or made again once cleared
        for name, capacity, zone, price in offerings:
            assert catalog.hourly(name, capacity, zone) == price
        assert catalog.hourly("no.such-type", OD, "us-east-1a") == 0.0
        assert len(catalog._hourly) <= 7
