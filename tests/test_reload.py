"""A changed configuration while `run` serves: on SIGHUP or when the file's content changes,
checked whole; refused with every problem logged (the service runs on as it was), applied
without a restart when it changes what the controller reads (pools, limits, timings), or by
restarting in place (the same process) when it changes what the process holds."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_service import DEMO, PROVIDER, free_port, reaped, wait_for

from nodemanager.config.schema import ProviderConfig
from nodemanager.reload import ConfigFile


def test_a_change_is_its_content_and_a_bad_one_is_refused_whole(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("pools: [{name: a}]\n")
    watched = ConfigFile(str(path), ProviderConfig.model_validate({"pools": [{"name": "a"}]}))
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert watched.changed() is False  # touched, not changed
    path.unlink()
    assert watched.changed() is False  # gone for a moment (a ConfigMap's link swapped)
    path.write_text("pools: [{name: a}]\n")
    assert watched.changed() is False  # back as it was
    assert watched.newer() is None  # the same configuration: nothing to apply
    path.write_text("pools: [{name: a, limits: {nodes: -1}}]\nnodes: {idleGrace: never}\n")
    assert watched.changed() is True
    assert watched.changed() is False  # said once
    with caplog.at_level(logging.ERROR, logger="nodemanager"):
        assert watched.newer() is None
    (refusal,) = [r.getMessage() for r in caplog.records]
    assert "configuration reload refused, still running the configuration it started with" in refusal
    assert "pools[0].limits.nodes: must be >= 0, got -1" in refusal
    assert "nodes.idleGrace: expected a duration" in refusal
    path.write_text("pools: [{name: a}]\nnodes: {idleGrace: 2m}\n")
    assert watched.changed() is True
    config, _ = watched.newer()  # type: ignore[misc]
    assert config.nodes.idle_grace == 120


@pytest.mark.heavy
def test_reload_refuses_a_bad_file_applies_a_limit_live_and_restarts_in_place_for_the_cloud(tmp_path: Path) -> None:
    port = free_port()
    good = PROVIDER.read_text().replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{port}").replace("workload: demo-workload.yaml", f"workload: {DEMO}")
    good = good.replace("  orphanGC: 30s\n", "  orphanGC: 30s\n  configCheck: 1s\n")
    path = tmp_path / "provider.yaml"
    path.write_text(good)
    log_path = tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with log_path.open("w") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "nodemanager.cli", "run", "--config", str(path)], stderr=log_file, text=True, env=env)

    def logged(text: str, times: int = 1, within: float = 20) -> None:
        deadline = time.monotonic() + within
        while log_path.read_text().count(text) < times and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log_path.read_text().count(text) >= times, log_path.read_text()[-3000:]

    with reaped(proc):
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/readyz", time.monotonic() + 30)
        path.write_text(good.replace("idleGrace: 15s", "idleGrace: never"))  # a typo: seen within configCheck
        logged("configuration reload refused")
        assert "nodes.idleGrace: expected a duration such as 90s, 5m or 1h, got 'never'" in log_path.read_text()
        proc.send_signal(signal.SIGHUP)  # asked again: the same refusal
        logged("configuration reload refused", times=2)
        assert proc.poll() is None
        assert wait_for(f"{base}/readyz", time.monotonic() + 5) == b"ready\n"  # serving as it was
        live = good.replace("idleGrace: 15s", "idleGrace: 20s").replace("      nodes: 20\n", "      nodes: 3\n")
        path.write_text(live)  # a pool's limit and a timing: applied without a restart
        logged("applied without a restart")
        assert proc.poll() is None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = json.loads(wait_for(f"{base}/status", deadline))
            if status["pools"][0]["limits"]["nodes"] == 3:
                break
            time.sleep(0.1)
        assert status["pools"][0]["limits"]["nodes"] == 3
        assert status["config"]["nodes"]["idleGrace"] == "20s"
        assert log_path.read_text().count("nodemanager starting") == 1  # the same process, never restarted
        path.write_text(live.replace("seed: 7", "seed: 8"))  # the simulated cloud's: the process holds it
        logged("where a restart is needed")
        logged("nodemanager starting", times=2)  # the same process, started again
        assert proc.poll() is None
        wait_for(f"{base}/readyz", time.monotonic() + 30)
        status = json.loads(wait_for(f"{base}/status", time.monotonic() + 5))
        assert status["config"]["cloud"]["simulated"]["seed"] == 8
        assert status["pools"][0]["limits"]["nodes"] == 3
        proc.send_signal(signal.SIGHUP)  # read again, unchanged: nothing to do
        logged("unchanged")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    assert "Traceback" not in log_path.read_text()


def test_what_applies_live_is_what_only_the_controller_reads() -> None:
    from nodemanager.service import applies_live

    base = {"pools": [{"name": "a", "limits": {"nodes": 5}}]}

    def config(**changes: object) -> ProviderConfig:
        return ProviderConfig.model_validate({**base, **changes})

    assert applies_live(config(), config(pools=[{"name": "a", "limits": {"nodes": 3}}, {"name": "b"}]))
    assert applies_live(config(), config(nodes={"idleGrace": "1m"}, loops={"pool": "3s"}, scheduling={"seed": 2}))
    assert not applies_live(config(), config(cloud={"simulated": {"seed": 8}}))
    assert not applies_live(config(), config(status={"listen": "127.0.0.1:9090"}))
    assert not applies_live(config(), config(nodes={"bootImageSpec": {"imageIDs": ["ami-2"]}}))
    assert not applies_live(config(), config(catalog={"spotPriceFraction": 0.3}))
