"""Configs that ``check-config`` used to accept and ``run`` could not survive: each is now
refused by ``check-config`` with exit status 2, naming its key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodemanager.cli import main

POOL = "pools: [{name: a}]\n"
AWS = "controllerId: x\nnodes: {bootImageSpec: {imageIDs: [ami-1]}}\n"


def _cases(tmp: Path) -> list[tuple[str, str, str]]:
    deep = tmp / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    blank = tmp / "blank-token"
    blank.write_text("  \n")
    huge = tmp / "huge-token"
    with huge.open("wb") as f:
        f.truncate(400 * 2**20)  # 400 MB, sparse
    tags = ", ".join(f"t{i}: v" for i in range(60))
    standby = ", ".join("{count: 100}" for _ in range(60))
    return [
        ("20-digit-duration", "nodes: {idleGrace: 11111111111111111111}\n" + POOL, "nodes.idleGrace: must be at most a year"),
        (
            "cron-never-fires",
            "pools: [{name: a, disruption: {budgets: [{nodes: '0', schedule: '0 0 31 2 *', duration: 1h}]}}]\n",
            "pools[0].disruption.budgets[0].schedule: '0 0 31 2 *' never fires",
        ),
        ("boot-timeout-zero", "nodes: {bootTimeout: 0}\n" + POOL, "nodes.bootTimeout: must be >= 30"),
        ("standby-in-all", f"pools: [{{name: a, standby: [{standby}]}}, {{name: b, standby: [{standby}]}}]\n", "12,000 standby nodes in all"),
        (
            "standby-entries",
            "pools: [{name: a, standby: [" + ", ".join("{count: 1}" for _ in range(300)) + "]}]\n",
            "pools[0].standby: List should have at most 100",
        ),
        ("loop-1ms", "loops: {pool: 1ms}\n" + POOL, "loops.pool: must be >= 0.1"),
        ("catalog-dev-zero", "catalog: {file: /dev/zero}\n" + POOL, "catalog: cannot load the instance catalog: /dev/zero is not a regular file"),
        ("catalog-deep", f"catalog: {{file: {deep}}}\n" + POOL, "nests deeper than a catalog does"),
        (
            "many-patterns",
            "pools: [{name: a, instanceTypes: [" + ", ".join(f"'m{i}.*'" for i in range(10_000)) + "]}]\n",
            "pools[0].instanceTypes: List should have at most 500",
        ),
        ("5000-digits", "pools: [{name: a, weight: " + "1" * 5000 + "}]\n", "pools[0].weight: a number of 5,000 digits"),
        (
            "unset-token-env",
            "status: {bearerTokenEnv: NM_SURELY_UNSET_TOKEN}\n" + POOL,
            "status.bearerTokenEnv: environment variable NM_SURELY_UNSET_TOKEN is not set",
        ),
        ("blank-token-file", f"status: {{bearerTokenFile: {blank}}}\n" + POOL, f"status.bearerTokenFile: {blank} is empty"),
        ("huge-token-file", f"status: {{bearerTokenFile: {huge}}}\n" + POOL, "more than the 65,536 allowed"),
        (
            "user-data-16k",
            AWS + "cloud: {provider: aws, aws: {region: us-east-1, userData: '" + "#" * 16_000 + "'}}\n" + POOL,
            "cloud.aws.userData: 16,000 bytes",
        ),
        (
            "60-tags",
            AWS + f"cloud: {{provider: aws, aws: {{region: us-east-1, tags: {{{tags}}}}}}}\n" + POOL,
            "cloud.aws.tags: Dictionary should have at most 44",
        ),
        ("label-key", "pools: [{name: a, labels: {'bad key!': x}}]\n", "pools[0].labels: 'bad key!' is not a valid label key"),
        ("label-value-shell", "pools: [{name: a, labels: {team: '$(reboot)'}}]\n", "pools[0].labels: team: '$(reboot)' is not a valid label value"),
        (
            "taint-value",
            "pools: [{name: a, taints: [{key: k, value: 'a b', effect: NoSchedule}]}]\n",
            "pools[0].taints[0]: k: 'a b' is not a valid label value",
        ),
        (
            "healthy-below-heartbeat",
            "nodes: {healthyTimeout: 5s}\nloops: {heartbeat: 10s}\n" + POOL,
            "nodes.healthyTimeout (5s) is shorter than loops.heartbeat (10s)",
        ),
    ]


def test_each_config_run_could_not_survive_is_refused_by_check_config(tmp_path, capsys):
    os.environ.pop("NM_SURELY_UNSET_TOKEN", None)
    failures = []
    for name, text, expected in _cases(tmp_path):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        code = main(["check-config", str(path)])
        err = capsys.readouterr().err
        if code != 2 or expected not in err or "Traceback" in err:
            failures.append(f"{name}: exit {code}, wanted {expected!r} in:\n{err[:600]}")
    assert failures == [], "\n\n".join(failures)


@pytest.mark.parametrize("listen", ["[::1]:8080", "127.0.0.1:8080", "localhost:8080"])
def test_documented_listen_forms_pass_the_check(tmp_path, capsys, listen):
    path = tmp_path / "p.yaml"
    path.write_text(f"status: {{listen: '{listen}'}}\n" + POOL)
    assert main(["check-config", str(path)]) == 0


def test_a_listen_address_that_does_not_resolve_is_refused(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("status: {listen: 'status.invalid:8080', allowUnauthenticated: true}\n" + POOL)
    assert main(["check-config", str(path)]) == 2
    assert "status.listen: status.invalid does not resolve to an address" in capsys.readouterr().err
