"""``simulate`` and ``run`` as a user runs them."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodemanager.cli import main

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "config" / "demo-workload.yaml"
PROVIDER = REPO / "config" / "provider.yaml"


def test_simulate_json_report_has_the_documented_fields(capsys):
    assert main(["simulate", "--config", str(PROVIDER), "--workload", str(DEMO), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pods"]["total"] == 11
    assert report["pods"]["bound"] == 11
    assert set(report["pods"]["pending_seconds"]) == {"p50", "p95", "max"}
    assert set(report["nodes"]) == {"booted", "terminated", "peak", "by_instance_type", "launch_failures", "launch_fallbacks"}
    assert report["nodes"]["booted"] >= report["nodes"]["peak"] > 0
    assert report["nodes"]["terminated"] > 0  # idle and used cell nodes stopped before the end
    assert report["cost"]["usd"] >= report["cost"]["lower_bound_usd"] > 0
    assert 0 < report["utilization"]["cpu"] <= 1
    assert report["decisions"]["count"] > 0
    assert set(report["decisions"]["compute_ms"]) == {"p50", "p99", "max"}
    assert report["unschedulable"] == []
    assert "us-east-1.json (generated " in report["prices"]["catalog"]  # the report says where its prices come from
    assert report["prices"]["spot"].startswith("0.4 x on-demand")


def test_simulate_is_deterministic(capsys):
    args = ["simulate", "--config", str(PROVIDER), "--workload", str(DEMO), "--json"]
    main(args)
    first = json.loads(capsys.readouterr().out)
    main(args)
    second = json.loads(capsys.readouterr().out)
    first.pop("decisions")
    second.pop("decisions")  # compute times are wall-clock measurements
    assert first == second


def test_simulate_until_and_unschedulable(capsys, tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "pods:\n"
        "  - {name: huge, pod: {containers: [{name: c, resources: {requests: {cpu: '500'}}}]}}\n"
        "  - {name: ok, pod: {nodeSelector: {workload: general}, containers: [{name: c}]}}\n"
    )
    assert main(["simulate", "--config", str(PROVIDER), "--workload", str(workload), "--json", "--until", "10m"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["simulated_seconds"] == 600
    assert [u["pod"] for u in report["unschedulable"]] == ["default/huge"]
    assert "no instance type can hold cpu=500" in report["unschedulable"][0]["reason"]
    assert report["pods"]["bound"] == 1


def test_simulate_human_report(capsys):
    assert main(["simulate", "--config", str(PROVIDER), "--workload", str(DEMO)]) == 0
    out = capsys.readouterr().out
    assert "pods:        11 total, 11 bound, 0 unschedulable" in out
    assert "cost:" in out


def test_bad_workload_exits_2_and_runs_nothing(capsys, tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text("pods: [{name: a, at: later, pod: {containers: [{name: c}]}}, {name: b, count: 0, pod: {}}]\n")
    assert main(["simulate", "--config", str(PROVIDER), "--workload", str(workload), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "pods[0].at:" in captured.err
    assert "pods[1].count:" in captured.err


def test_bad_until_exits_2(capsys):
    assert main(["simulate", "--config", str(PROVIDER), "--workload", str(DEMO), "--until", "soonish"]) == 2
    assert "--until" in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def reaped(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """The process, killed at the end if a failed assertion left it running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for(url: str, deadline: float) -> bytes:
    """Poll a real process's endpoint until it answers (no fixed sleeps)."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return response.read()
        except OSError as exc:
            last = exc
            time.sleep(0.05)
    raise AssertionError(f"{url} did not answer: {last}")


@pytest.mark.heavy
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_serves_status_and_stops_cleanly_on_a_signal(tmp_path, sig):
    """The real-time service in a real process, stopped by SIGTERM or SIGINT (SIGHUP reads
    the configuration again: see test_reload)."""
    port = free_port()
    config = PROVIDER.read_text().replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{port}").replace("workload: demo-workload.yaml", f"workload: {DEMO}")
    path = tmp_path / "provider.yaml"
    path.write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # Its log goes to a file: a pipe nobody reads until the end fills (64 KB) and blocks
    # the service's logging, and with it the loops and the stop, on a slow machine.
    log_path = tmp_path / "stderr.log"
    log_file = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "nodemanager.cli", "run", "--config", str(path)], stderr=log_file, text=True, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/readyz", time.monotonic() + 20)
        status = json.loads(wait_for(f"{base}/status", time.monotonic() + 5))
        assert status["controller"]["id"] == "demo"
        assert status["controller"]["ready"] is True
        deadline = time.monotonic() + 20
        while not status["nodes"] and time.monotonic() < deadline:  # the first pool pass may still be on its way
            time.sleep(0.05)
            status = json.loads(wait_for(f"{base}/status", deadline))
        assert status["nodes"], "no node booted within 20 s"
        proc.send_signal(sig)
        began = time.monotonic()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("no exit 15 s after the signal; its log ends:\n" + log_path.read_text()[-3000:]) from None
        log = log_path.read_text()
        assert time.monotonic() - began < 5, log[-3000:]
        assert proc.returncode == 0
        assert "stopped" in log
        assert "booting" in log  # the demo workload made it boot nodes
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log_file.close()


def test_run_with_a_bad_config_exits_2(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("pools: [{name: a, limits: {nodes: -1}}]\n")
    assert main(["run", "--config", str(path)]) == 2
    assert "pools[0].limits.nodes: must be >= 0, got -1" in capsys.readouterr().err


def test_simulation_ends_soon_after_the_workload_settles(capsys):
    """The 12-hour price loop must not keep a settled simulation running."""
    assert main(["simulate", "--config", str(PROVIDER), "--workload", str(DEMO), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["simulated_seconds"] < 300


@pytest.mark.heavy
def test_a_cloud_that_cannot_be_read_at_start_leaves_the_service_live_unready_and_stoppable_at_once(tmp_path):
    """No credentials and an EC2 endpoint nobody answers: the process stays up (no exit 1
    into a CrashLoopBackOff), /healthz 200 and /readyz 503, a warning per try naming the
    failure without a traceback; SIGTERM then ends it within a second, status 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"}
    path = tmp_path / "p.yaml"
    port = free_port()
    path.write_text(
        "controllerId: x\ncloud: {provider: aws, aws: {region: us-east-1, endpointURL: 'http://127.0.0.1:9'}}\n"
        f"nodes: {{bootImageSpec: {{imageIDs: [ami-1]}}}}\nstatus: {{listen: '127.0.0.1:{port}'}}\npools: [{{name: a}}]\n"
        "loops: {pool: 1s}\n"
    )
    log_path = tmp_path / "stderr.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "nodemanager.cli", "run", "--config", str(path)], stderr=log_file, text=True, env=env)
        try:
            # (a start, not what is tested: a loaded CI machine took over 20 s to import and listen)
            wait_for(f"http://127.0.0.1:{port}/healthz", time.monotonic() + 60)
            deadline = time.monotonic() + 20
            while log_path.read_text().count("recovery failed") < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert readyz(port) == 503
            assert wait_for(f"http://127.0.0.1:{port}/healthz", time.monotonic() + 1) == b"ok\n"  # live: each try completes its run
            assert proc.poll() is None  # alive
            proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            assert proc.wait(timeout=10) == 0
            assert time.monotonic() - began < 1.5
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    log = log_path.read_text()
    assert "recovery failed (NoCredentialsError: Unable to locate credentials); not ready" in log
    assert "Traceback" not in log


def readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.heavy
def test_a_stop_does_not_wait_for_a_stuck_loop_beyond_its_grace(tmp_path, caplog):
    """A loop stuck in work that does not look at the stop (SIGTERM used to log "stopping"
    and then wait for it forever): the stop gives up after its grace and names the loop."""
    from nodemanager.config import parse_config
    from nodemanager.service import Service

    config_text = PROVIDER.read_text().replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{free_port()}")
    config_text = config_text.replace("workload: demo-workload.yaml", f"workload: {DEMO}")
    config, catalog = parse_config(config_text, "provider.yaml", tmp_path)
    service = Service(config, catalog, "test")
    entered, release = threading.Event(), threading.Event()
    original = service.controller.heartbeat_loop

    def stuck() -> None:
        with service.controller.timers["heartbeat"].timing(service.controller.clock):
            entered.set()
            release.wait(30)
        original()

    service.controller.heartbeat_loop = stuck  # type: ignore[method-assign]
    service.start()
    try:
        assert entered.wait(10)
        began = time.monotonic()
        with caplog.at_level("ERROR", logger="nodemanager"):
            assert service.stop(grace=0.5) is False
        assert time.monotonic() - began < 5
        assert any("heartbeat still running" in r.getMessage() for r in caplog.records)
    finally:
        release.set()


class _Elector:
    """A leader elector that leads from the start and notes its release."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.identity = "test"
        self.problem = None
        self.on_stopped = None
        self.settings = type("S", (), {"retry_period": 3600.0})()

    def leading(self) -> bool:
        return not self.released.is_set()

    def tick(self) -> bool:
        return self.leading()

    def release(self) -> None:
        self.released.set()

    def describe(self) -> dict:
        return {}


@pytest.mark.heavy
def test_a_stop_while_recovering_releases_the_lease_at_once_and_acts_on_nothing(tmp_path):
    """SIGTERM 6 s after gaining leadership, recovery still reading the cloud: the stop
    exited 1 and kept the Lease (the next replica waited ~50 s). Recovery only reads, so
    the lease goes at once, and the term it was starting never begins."""
    from nodemanager.config import parse_config
    from nodemanager.service import Service

    config_text = PROVIDER.read_text().replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{free_port()}")
    config_text = config_text.replace("workload: demo-workload.yaml", f"workload: {DEMO}")
    config, catalog = parse_config(config_text, "provider.yaml", tmp_path)
    service = Service(config, catalog, "test")
    elector = _Elector()
    service.elector = service.gate.elector = elector  # type: ignore[assignment]
    entered, release = threading.Event(), threading.Event()
    controller = service.controller
    original = controller.recover

    def slow_recovery() -> None:
        entered.set()
        release.wait(30)
        original()

    controller.recover = slow_recovery  # type: ignore[method-assign]
    answers: list[bool] = []
    acting = service.gate.acting
    service.gate.acting = lambda: answers.append(acting()) or answers[-1]  # type: ignore[method-assign]
    service.start()
    try:
        assert entered.wait(10)
        began = time.monotonic()
        assert service.stop(grace=0.5) is True  # exit 0
        assert time.monotonic() - began < 5
        assert elector.released.is_set()
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while not answers and time.monotonic() < deadline:  # the recovery ends by itself
        time.sleep(0.01)
    assert answers[0] is False  # and the loop that ran it does not act
    assert not service.gate.in_term
    assert controller.state.nodes == {}  # nothing was booted


def test_simulate_compare_plays_one_workload_against_several_configs(tmp_path, capsys):
    """A platform team's question before deploying: which configuration, for this workload?"""
    paths = []
    for name, boots in (("fast.yaml", 10), ("slow.yaml", 1)):
        text = PROVIDER.read_text().replace("maxBootsPerLoop: 10", f"maxBootsPerLoop: {boots}").replace("workload: demo-workload.yaml", f"workload: {DEMO}")
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    assert main(["simulate", "--workload", str(DEMO), "--compare", *paths, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["config"] for r in rows] == paths
    fast, slow = (r["report"] for r in rows)
    assert fast["pods"]["bound"] == slow["pods"]["bound"] == 11
    assert slow["pods"]["pending_seconds"]["p95"] > fast["pods"]["pending_seconds"]["p95"]  # one boot per loop waits longer
    assert main(["simulate", "--workload", str(DEMO), "--compare", *paths]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("CONFIG")
    assert "EVICTED REDONE H" in table[0]  # what disruption cost the pods, beside the cost
    assert fast["pods"]["evicted"]["count"] == int(table[1].split()[10])
    assert len(table) == 3
    assert main(["simulate", "--workload", str(DEMO), "--compare", *paths, "--config", paths[0]]) == 2
    assert "--config or --compare, not both" in capsys.readouterr().err


def test_the_progress_bar_shows_simulated_time_pods_bound_instances_and_cost():
    import io

    from nodemanager.cli import _progress
    from nodemanager.cluster.workload import load_workload_file
    from nodemanager.config import load_config
    from nodemanager.simulator import Simulation

    config, catalog = load_config(PROVIDER)
    loaded = load_workload_file(DEMO)
    workload = loaded.arrivals
    simulation = Simulation(config, catalog, workload, None, loaded.objects)
    stream = io.StringIO()
    show, close = _progress(simulation, stream)
    simulation.run(until=600, progress=show)
    close()
    shown = stream.getvalue()
    assert re.search(r"day 1 \d\d:\d\d simulated", shown)
    assert re.search(rf"/{len(workload):,} pods bound, \d+ instances, \$", shown)
    assert re.search(r"\d+%\|", shown)  # how far, and the estimate of the time left
    assert "<" in shown


@pytest.fixture
def stop_handlers_restored():
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    before = {sig: signal.getsignal(sig) for sig in stops}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("stop_handlers_restored")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_the_stop_signal_is_caught_wherever_it_comes(sig):
    """A signal during start, or later from any thread, ends the wait with that signal. The
    handler only notes it: the old one set an Event, and a signal arriving while the waiting
    thread held that Event's lock (entering its wait) deadlocked the stop under load."""
    from nodemanager.service import wait_for_stop_signal

    assert wait_for_stop_signal(lambda: os.kill(os.getpid(), sig), poll=0.01) == sig  # during start
    began = time.monotonic()
    assert wait_for_stop_signal(lambda: threading.Timer(0.05, os.kill, (os.getpid(), sig)).start(), poll=0.01) == sig
    assert time.monotonic() - began < 5
    # a handler run outside the waiting thread (the kernel may deliver to any thread)
    began = time.monotonic()
    assert wait_for_stop_signal(lambda: threading.Timer(0.05, signal.getsignal(sig), (sig, None)).start(), poll=0.01) == sig
    assert time.monotonic() - began < 5
