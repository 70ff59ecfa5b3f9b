"""Reserved capacity played through ``simulate``: an On-Demand Capacity Reservation of 20
m5.xlarge is filled before anything is bought, billed at its term's price and counted by the
bound; a Capacity Block that ends mid-run has its nodes drained before EC2 reclaims them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodemanager.cli import main
from nodemanager.cluster.workload import load_workload_file
from nodemanager.config import parse_config
from nodemanager.model import CapacityType
from nodemanager.model.reservation import CAPACITY_BLOCK_RECLAIM
from nodemanager.simulator import Simulation

ODCR, BLOCK = "cr-0123456789abcdef0", "cr-0aaaaaaaaaaaaaaa1"
POOL = """cloud: {provider: simulated}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*"]
    capacityTypes: [reserved, on-demand]
    zones: [us-east-1a, us-east-1b]
    capacityReservations: [{id: cr-0123456789abcdef0, price: %(price)s}, {tags: {team: ml}}]
"""


def container(cpu: str, memory: str) -> dict:
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}


def workload(reservations: list[dict], pods: list[dict]) -> dict:
    return {"reservations": reservations, "pods": pods}


ODCR_WORKLOAD = workload(
    [{"id": ODCR, "instanceType": "m5.xlarge", "zone": "us-east-1a", "count": 20}],
    [{"name": "web", "count": 75, "duration": "2h", "pod": container("1", "2Gi")}],
)
BLOCK_WORKLOAD = workload(
    [
        {
            "id": BLOCK,
            "instanceType": "m5.2xlarge",
            "zone": "us-east-1b",
            "count": 4,
            "type": "capacity-block",
            "start": "10m",
            "end": "2h",
            "tags": {"team": "ml"},
        }
    ],
    [{"name": "train", "count": 12, "at": "15m", "duration": "3h", "pod": container("2", "4Gi")}],
)


def simulate(tmp_path: Path, capsys, doc: dict, price: float = 0.0, pool: str = POOL) -> dict:
    config, work = tmp_path / "provider.yaml", tmp_path / "workload.json"
    config.write_text(pool % {"price": price})
    work.write_text(json.dumps(doc))
    assert main(["simulate", "--config", str(config), "--workload", str(work), "--json", "--quiet", "--log-level", "error"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_odcr_of_20_m5_xlarge_is_filled_first_billed_at_its_price_and_counted_by_the_bound(tmp_path, capsys):
    free = simulate(tmp_path, capsys, ODCR_WORKLOAD)
    [used] = free["reservations"]
    assert (used["id"], used["launched"], used["selected"]) == (ODCR, 20, True)
    assert free["nodes"]["by_instance_type"]["m5.xlarge"] >= 20
    assert free["nodes"]["booted"] > 20  # 75 pods of 1 CPU: the 20 reserved hold 60, the rest is bought
    assert free["pods"]["bound"] == 75
    bought = simulate(tmp_path, capsys, {**ODCR_WORKLOAD, "reservations": [{**ODCR_WORKLOAD["reservations"][0], "id": "cr-0ffffffffffffff01"}]})
    assert bought["reservations"][0]["selected"] is False  # no pool selects it: all is bought
    assert bought["reservations"][0]["launched"] == 0
    assert free["cost"]["usd"] < bought["cost"]["usd"] / 2  # 60 of 75 pods ran on capacity already paid for
    assert free["cost"]["lower_bound_usd"] <= free["cost"]["usd"]
    assert free["cost"]["lower_bound_usd"] < bought["cost"]["lower_bound_usd"] <= bought["cost"]["usd"]  # the bound counts them as free
    priced = simulate(tmp_path, capsys, ODCR_WORKLOAD, price=0.05)
    [used] = priced["reservations"]
    assert used["usd"] == pytest.approx(used["instance_hours"] * 0.05, abs=1e-3)  # the bill shows them at their price
    assert priced["cost"]["usd"] == pytest.approx(free["cost"]["usd"] + used["usd"], abs=0.01)


def test_a_capacity_block_ending_mid_run_has_its_nodes_drained_before_ec2_reclaims_them(tmp_path):
    work = tmp_path / "workload.json"
    work.write_text(json.dumps(BLOCK_WORKLOAD))
    config, catalog = parse_config(POOL % {"price": 0}, "provider.yaml", tmp_path)
    loaded = load_workload_file(work)
    sim = Simulation(config, catalog, loaded.arrivals, loaded.devices, loaded.objects)
    report = sim.run()
    block = [(i, ended) for i, ended in sim.cloud.all_instances() if i.reservation == BLOCK]
    assert len(block) == 4  # the pods went to the block first
    assert all(i.capacity_type is CapacityType.RESERVED for i, _ in block)
    reclaim = 7200.0 - CAPACITY_BLOCK_RECLAIM
    assert all(ended is not None and ended <= reclaim for _, ended in block)  # terminated by nodemanager, before EC2 would
    assert [e for e in sim.cloud.events if e.kind == "capacity-block-reclaimed"] == []
    drained = 7200.0 - 2400.0  # drainLead: 40 minutes before the end
    assert all(ended >= drained for _, ended in block)  # not before its drain time
    assert report["pods"]["bound"] == 12
    assert report["pods"]["unfinished"] == []  # every pod ran its three hours: those on the block were moved, none was lost
    assert report["pods"]["evicted"]["pods"] > 0
    assert report["pods"]["evicted"]["pending_seconds"]["max"] <= 10  # their new nodes were Ready before they were evicted
    late = [i for i, _ in sim.cloud.all_instances() if i.launched_at >= drained]
    assert all(i.reservation != BLOCK for i in late)  # no node goes into a block about to end


def test_the_human_report_says_how_each_reservation_was_used(tmp_path, capsys):
    config, work = tmp_path / "provider.yaml", tmp_path / "workload.json"
    config.write_text(POOL % {"price": 0})
    work.write_text(json.dumps({**ODCR_WORKLOAD, "reservations": [*ODCR_WORKLOAD["reservations"], {**BLOCK_WORKLOAD["reservations"][0], "tags": {}}]}))
    assert main(["simulate", "--config", str(config), "--workload", str(work), "--quiet", "--log-level", "error"]) == 0
    out = capsys.readouterr().out
    assert f"reservation: {ODCR} (20 m5.xlarge in us-east-1a, default): 20 launched," in out
    assert f"reservation: {BLOCK} (4 m5.2xlarge in us-east-1b, capacity-block): no pool selects it" in out
