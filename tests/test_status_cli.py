"""``nodemanager status``: a running service's /status as tables, JSON or YAML."""

from __future__ import annotations

import argparse
import io
import json

import pytest
import yaml
from demo import demo_controller

from nodemanager.cli import _status_command, main
from nodemanager.status.metrics import Metrics
from nodemanager.status.server import StatusServer
from nodemanager.status.terminal import render

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def demo():
    """The demo configuration after 40 s: nodes booted, pods bound, idle ones stopping."""
    controller = demo_controller(40)
    server = StatusServer("127.0.0.1:0", controller.status, lambda: True, Metrics(), TOKEN)
    server.start()
    yield controller, f"http://127.0.0.1:{server.address[1]}"
    server.stop()


def test_tables_of_pools_pods_nodes_and_disruption(demo, capsys, monkeypatch):
    controller, url = demo
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", TOKEN)
    assert main(["status", "--url", url]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("nodemanager 0.1.0  controller demo  ready  leader  $")
    general = next(line.split() for line in lines if line.startswith("general "))
    live = sum(1 for n in controller.status()["nodes"] if n["pool"] == "general" and n["state"] in ("Available", "Claimed"))
    assert general[:3] == ["general", "binpack", f"{live}/20"]  # nodes against the pool's limit
    assert general[3].endswith("/200")
    assert general[4].endswith("/800Gi")
    assert general[5:] == ["1/1", "ok"]  # the standby node present; boots not paused
    assert any(line.startswith("jobs ") and "/10" in line for line in lines)
    nodes = [line for line in lines if line.startswith("nodemanager-")]
    assert len(nodes) == len(controller.status()["nodes"])
    assert "DISRUPTION  " in out


def test_json_and_yaml_give_the_whole_document(demo, capsys, monkeypatch):
    _, url = demo
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", TOKEN)
    assert main(["status", "--url", url, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"controller", "pools", "nodes", "pods", "disruption"} <= doc.keys()
    assert main(["status", "--url", url, "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["pools"] == doc["pools"]


def test_a_missing_token_and_an_unreachable_service_are_said_plainly(demo, capsys, monkeypatch):
    _, url = demo
    monkeypatch.delenv("NODEMANAGER_STATUS_TOKEN", raising=False)
    assert main(["status", "--url", url]) == 1
    assert "answered 401 Unauthorized: set NODEMANAGER_STATUS_TOKEN or give --config" in capsys.readouterr().err
    assert main(["status", "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach http://127.0.0.1:9/status" in capsys.readouterr().err


def test_config_says_where_the_service_listens_and_its_token(demo, tmp_path, capsys, monkeypatch):
    _, url = demo
    port = url.rsplit(":", 1)[1]
    monkeypatch.delenv("NODEMANAGER_STATUS_TOKEN", raising=False)
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    (tmp_path / "token").write_text(TOKEN)
    config = tmp_path / "p.yaml"
    config.write_text(f"pools: [{{name: a}}]\nstatus: {{listen: '0.0.0.0:{port}', bearerTokenEnv: MY_TOKEN}}\n")
    assert main(["status", "--config", str(config)]) == 0  # 0.0.0.0 is asked on loopback
    assert "POOL" in capsys.readouterr().out


def test_watch_shows_it_again_each_round(demo, monkeypatch):
    _, url = demo
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", TOKEN)
    out = io.StringIO()
    args = argparse.Namespace(url=url, config=None, output="table", watch=0.01)
    assert _status_command(args, out, rounds=3) == 0
    assert out.getvalue().count("\nPOOL ") == 3


def test_waiting_pods_are_grouped_by_reason_with_the_oldest_wait():
    doc = {
        "controller": {"id": "x", "version": "1", "now": 1000.0, "ready": False},
        "pods": {
            "counts": {"waiting": 4},
            "waiting": [
                {"pod": "a/1", "reason": "pool general: limit on nodes reached", "since": 900.0},
                {"pod": "a/2", "reason": "pool general: limit on nodes reached", "since": 400.0},
                {"pod": "a/3", "reason": "pool general: limit on nodes reached", "since": 990.0},
                {"pod": "a/4", "reason": "no pool accepts the pod", "since": 995.0},
            ],
        },
    }
    text = render(doc)
    assert "NOT READY" in text.splitlines()[0]
    rows = [line.split(None, 2) for line in text.splitlines() if line[:1].isdigit()]
    assert rows == [["3", "10m", "pool general: limit on nodes reached"], ["1", "5s", "no pool accepts the pod"]]
