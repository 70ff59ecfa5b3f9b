"""End to end over HTTP: a moto server on 127.0.0.1, ``nodemanager run`` with ``cloud: aws``
and ``cluster: simulated`` in a real process, killed with SIGKILL during a scale-up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import boto3
import pytest
from bench_modules import load_benchmark
from moto.server import ThreadedMotoServer
from test_cli_service import free_port, wait_for

from cloud.base import CONTROLLER_TAG, NODE_TAG

CONFIG = """
controllerId: e2e
cloud:
  provider: aws
  aws: {{region: us-east-1, endpointURL: "http://127.0.0.1:{ec2_port}", refreshPrices: false}}
cluster:
  source: simulated
  simulated: {{workload: {workload}, registerDelay: 1s}}
nodes:
  defaultInstanceType: m5.large
  bootImageSpec: {{owners: [amazon], filters: {{name: ["amzn2-ami-hvm-*-gp2"]}}}}
  idleGrace: 2s
  maxBootsPerLoop: 3
pools:
  - name: general
    packing: cell
    instanceTypes: [m5.large]
    capacityTypes: [on-demand]
loops: {{pool: 1s, heartbeat: 1s, reaper: 1s, orphanGC: 2s}}
status: {{listen: "127.0.0.1:{status_port}"}}
"""
WORKLOAD = "pods:\n  - {name: job, count: 8, duration: 3s, pod: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}}\n"
SECRET = "nm-e2e-secret-8c1f02"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "AKIANMTESTE2E", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}


def status(port: int) -> dict:
    """A full document: one answered while a loop held the controller is marked busy and,
    before any full one was built, holds only the controller section."""
    deadline = time.monotonic() + 10
    while True:
        doc = json.loads(wait_for(f"http://127.0.0.1:{port}/status", deadline))
        if "nodes" in doc or time.monotonic() > deadline:
            return doc
        time.sleep(0.1)


def until(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.heavy
def test_run_against_an_ec2_endpoint_survives_sigkill(tmp_path):
    ec2_port, status_port = free_port(), free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=ec2_port)
    server.start()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **CREDENTIALS}
    ec2 = boto3.client(
        "ec2", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{ec2_port}", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    workload = tmp_path / "workload.yaml"
    workload.write_text(WORKLOAD)
    config = tmp_path / "provider.yaml"
    config.write_text(CONFIG.format(ec2_port=ec2_port, status_port=status_port, workload=workload))
    command = [sys.executable, "-m", "nodemanager.cli", "run", "--config", str(config)]

    def ours() -> list[dict]:
        reply = ec2.describe_instances(Filters=[{"Name": f"tag:{CONTROLLER_TAG}", "Values": ["e2e"]}])
        return [i for r in reply["Reservations"] for i in r["Instances"]]

    def alive() -> list[dict]:
        return [i for i in ours() if i["State"]["Name"] in ("pending", "running")]

    # Logs go to files: a pipe nobody reads until the end fills (64 KB) and blocks the service.
    first_log, second_log = (tmp_path / "first.log").open("w"), (tmp_path / "second.log").open("w")
    first = subprocess.Popen(command, env=env, stderr=first_log, text=True)
    second = None
    try:
        wait_for(f"http://127.0.0.1:{status_port}/readyz", time.monotonic() + 30)
        until(lambda: len(ours()) >= 3, 30, "the first boots")
        first.send_signal(signal.SIGKILL)  # mid scale-up: boots launched, pods not all bound
        first.wait(timeout=10)
        launched_before = len(ours())
        assert 3 <= launched_before < 8
        left_behind = {i["InstanceId"] for i in alive()}

        second = subprocess.Popen(command, env=env, stderr=second_log, text=True)
        wait_for(f"http://127.0.0.1:{status_port}/readyz", time.monotonic() + 30)
        adopted = {n["instance_id"] for n in status(status_port)["nodes"]}
        # every instance the killed process left was adopted (the new one may be booting more)
        assert left_behind <= adopted
        until(lambda: len(ours()) >= 8, 60, "the scale-up to finish")
        until(lambda: not alive(), 90, "the scale-down")  # cell nodes end with their jobs
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=10) == 0
        names = Counter(next(t["Value"] for t in i["Tags"] if t["Key"] == NODE_TAG) for i in ours())
        assert len(names) >= 8
        assert max(names.values()) == 1  # no node was launched twice
        assert not alive()  # nothing leaked
        logs = (tmp_path / "first.log").read_text() + (tmp_path / "second.log").read_text()
        assert "booting" in logs
        assert SECRET not in logs  # credentials never reach the logs
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        first_log.close()
        second_log.close()
        server.stop()


@pytest.mark.heavy
def test_a_cloud_outage_and_a_reset_endpoint_on_a_moto_server():
    """The EC2 endpoint down, then back, then reset to nothing (benchmarks/outage.py, with a
    short outage): /status answers every probe, the log has a line per pass rather than per
    retry or node, the pool converges after each, and the reset's failed boots pause the pool
    once instead of storming."""
    outage = load_benchmark("outage")
    result = outage.run(down=8.0)
    for phase in ("outage_probes", "reset_probes"):
        assert set(result[phase]["answers"]) == {"200"}, result[phase]
    assert result["instances_after_outage"] == {"live": outage.PODS, "names_launched_twice": []}
    assert result["instances_after_reset"] == {"live": outage.PODS, "names_launched_twice": []}
    assert result["converged_after_return_s"] is not None
    assert result["converged_after_reset_s"] is not None
    log = result["log"]
    assert log["outage"]["unreachable"] == log["outage"]["warnings"] <= 4  # a line per pass whose retries ran out, none per retry
    assert log["reset"]["boot_failures"] <= 2 * outage.PODS  # one round failed (the stale subnets), paused, then booted
    assert result["most_node_records"] <= 3 * outage.PODS
    assert result["tracebacks"] == 0
    assert result["exit_status"] == 0
