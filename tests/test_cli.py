"""The command line as a user runs it: output and exit status."""

import json
import subprocess
import sys

import pytest

from nodemanager.cli import main, parse_fits
from nodemanager.errors import InvalidInput
from nodemanager.model import Resources


def test_check_config_ok(capsys, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("pools: [{name: a}]\n")
    assert main(["check-config", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"OK: {path}: 1 pool(s)")


def test_check_config_lists_every_error_and_exits_2(capsys, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("nodes: {healthyTimeout: never}\npools: [{name: a, standby: [{count: -2}]}]\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 error(s)" in err
    assert "nodes.healthyTimeout: expected a duration such as 90s, 5m or 1h, got 'never'" in err
    assert "pools[0].standby[0].count: must be >= 0, got -2" in err


def test_check_config_missing_file_exits_2(capsys):
    assert main(["check-config", "/nonexistent.yaml"]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_catalog_lists_cheapest_first(capsys):
    assert main(["catalog", "--fits", "cpu=2,memory=8Gi,gpu=1", "--capacity-type", "on-demand", "--arch", "x86_64", "--json", "--limit", "5"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["instance_type"] == "g4dn.xlarge"
    prices = [r["price_per_hour"] for r in rows]
    assert prices == sorted(prices)
    assert all(r["gpus"] and r["capacity_type"] == "on-demand" for r in rows)


def test_catalog_table(capsys):
    assert main(["catalog", "--fits", "cpu=1", "--instance-types", "m5.*", "--capacity-type", "on-demand", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["TYPE", "CAPACITY", "$/HOUR"]
    assert lines[1].split()[:3] == ["m5.large", "on-demand", "0.0960"]


def test_catalog_nothing_fits_exits_1(capsys):
    assert main(["catalog", "--fits", "cpu=100000"]) == 1
    assert "no instance type fits" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["cpu", "cpu=", "cpu=fast", "memory=-1Gi"])
def test_bad_fits_exit_2(bad, capsys):
    assert main(["catalog", "--fits", bad]) == 2
    assert "--fits" in capsys.readouterr().err


def test_parse_fits_aliases():
    assert parse_fits("cpu=2,memory=8Gi,gpu=1") == Resources.parse({"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"})
    with pytest.raises(InvalidInput):
        parse_fits("gpu")


def test_console_script_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "nodemanager.cli", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("nodemanager ")


def test_catalog_says_an_unknown_zone_or_a_glob_matching_nothing_is_the_problem(capsys):
    """Both answered "no instance type fits", as if no type were large enough."""
    assert main(["catalog", "--zone", "us-east-9z"]) == 2
    assert "--zone: 'us-east-9z' is not a zone of the us-east-1 catalog (us-east-1a, " in capsys.readouterr().err
    assert main(["catalog", "--instance-types", "m5.*", "zz*"]) == 2
    assert "--instance-types: 'zz*' matches no instance type of the us-east-1 catalog" in capsys.readouterr().err


def test_check_config_reads_the_kubeconfig_it_names_and_names_its_own_file(tmp_path, capsys):
    """A missing or broken kubeconfig was found only by `run`, and said "provider.yaml"
    whatever the file's name."""
    config = tmp_path / "prod-east.yaml"
    config.write_text("pools: [{name: a}]\ncluster: {source: kubernetes, kubernetes: {kubeconfig: missing.yaml}}\n")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"configuration error in {config}" in err
    assert f"cluster.kubernetes.kubeconfig: no such file: {tmp_path / 'missing.yaml'}" in err
    (tmp_path / "missing.yaml").write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    assert main(["check-config", str(config)]) == 0
    config.write_text(config.read_text().replace("kubeconfig: missing.yaml", "kubeconfig: missing.yaml, context: staging"))
    assert main(["check-config", str(config)]) == 2
    assert "Expected object with name staging" in capsys.readouterr().err
