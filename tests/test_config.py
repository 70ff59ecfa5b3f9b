"""provider.yaml: defaults, the shipped files, and invalid files with their exact error lines."""

import pickle
import textwrap
from pathlib import Path

import pytest

from nodemanager.cluster.workload import WorkloadError
from nodemanager.config import embedded_default_path, load_config, parse_config
from nodemanager.durations import format_duration, parse_duration
from nodemanager.errors import ConfigError, IllegalTransition, InvalidManifest, InvalidQuantity
from nodemanager.model import CapacityType

REPO = Path(__file__).resolve().parent.parent
MINIMAL = "pools: [{name: a}]\n"
IMAGE = "nodes: {bootImageSpec: {imageIDs: [ami-1]}}\n"


def problems_of(text: str, base: Path = REPO) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(textwrap.dedent(text), "test.yaml", base)
    return err.value.problems


def test_minimal_file_gets_documented_defaults():
    config, catalog = parse_config(MINIMAL, "t", REPO)
    nodes = config.nodes
    assert (nodes.boot_timeout, nodes.healthy_timeout, nodes.max_boots_per_loop, nodes.unavailable_offering_ttl) == (300, 90, 10, 180)
    assert (config.loops.pool, config.loops.heartbeat, config.loops.reaper, config.loops.orphan_gc) == (7, 10, 10, 60)
    assert config.status.listen == "127.0.0.1:8080"
    pool = config.pools[0]
    assert (pool.packing.value, pool.instance_types, pool.capacity_types, pool.architectures) == ("binpack", ["*"], [CapacityType.ON_DEMAND], ["x86_64"])
    assert config.cloud.provider.value == "simulated"
    assert config.cloud.simulated is not None
    assert config.cluster.simulated is not None
    assert len(catalog) > 1000


@pytest.mark.parametrize("path", [embedded_default_path(), REPO / "config" / "examples" / "aws.yaml"], ids=["embedded", "aws-example"])
def test_shipped_files_are_valid(path, monkeypatch):
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "t0ken-from-the-secret")  # as the Deployment sets it
    config, _ = load_config(path)
    assert config.pools


def test_embedded_default_has_two_pools_and_a_standby_pool():
    config, _ = load_config()
    assert len(config.pools) == 2
    assert any(p.standby for p in config.pools)
    assert Path(config.cluster.simulated.workload).is_file()


@pytest.mark.parametrize(("text", "value"), [("90s", 90), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("250ms", 0.25), (45, 45), ("12", 12), ("1.5s", 1.5)])
def test_durations(text, value):
    assert parse_duration(text) == value


@pytest.mark.parametrize("text", ["soon", "5 m", "m", "-5s", "", "5x", True])
def test_bad_durations(text):
    with pytest.raises(ValueError, match=r"duration|negative"):
        parse_duration(text)


def test_durations_dump_readably():
    assert [format_duration(s) for s in (90, 300, 3600, 0.5)] == ["90s", "5m", "1h", "0.5s"]


HOSTNAME_LABEL_ADVICE = "kubernetes.io/hostname label: shorten the pool's name or nodes.nameTag"
INVALID = [
    pytest.param("pools: [{name: a}, {name: b, standby: [{count: -2}]}]", ["pools[1].standby[0].count: must be >= 0, got -2"], id="negative-standby"),
    pytest.param("pools: [{name: a, bogus: 1}]", ["pools[0].bogus: unknown key"], id="unknown-pool-key"),
    pytest.param("pool: [{name: a}]", ["pools: required", "pool: unknown key"], id="misspelt-top-key"),
    pytest.param("pools: []", ["pools: must not be empty"], id="no-pools"),
    pytest.param(
        "pools: [{name: a, limits: {cpu: lots}}]", ["pools[0].limits.cpu: expected a quantity such as 500m, 2Gi or 1.5, got 'lots'"], id="bad-quantity"
    ),
    pytest.param("pools: [{name: a, limits: {memory: -1Gi}}]", ["pools[0].limits.memory: expected a non-negative amount, got '-1Gi'"], id="negative-quantity"),
    pytest.param("nodes: {bootTimeout: soon}\n" + MINIMAL, ["nodes.bootTimeout: expected a duration such as 90s, 5m or 1h, got 'soon'"], id="bad-duration"),
    pytest.param("nodes: {maxBootsPerLoop: 0}\n" + MINIMAL, ["nodes.maxBootsPerLoop: must be >= 1, got 0"], id="zero-boot-cap"),
    pytest.param("pools: [{name: Web_1}]", ["pools[0].name: expected a DNS label (lowercase letters, digits and '-'), got 'Web_1'"], id="bad-pool-name"),
    pytest.param("pools: [{name: a}, {name: a}]", ["pools[1].name: duplicate pool name 'a' (also pools[0])"], id="duplicate-pool"),
    pytest.param("pools: [{name: a, packing: tetris}]", ["pools[0].packing: expected one of 'cell' or 'binpack', got 'tetris'"], id="bad-packing"),
    pytest.param(
        "pools: [{name: a, instanceTypes: ['zz*']}]",
        ["pools[0].instanceTypes[0]: 'zz*' matches no instance type in the us-east-1 catalog"],
        id="glob-matches-nothing",
    ),
    pytest.param(
        "pools: [{name: a, zones: [mars-1a]}]",
        ["pools[0].zones[0]: unknown zone 'mars-1a'; us-east-1 has ['us-east-1a', 'us-east-1b', 'us-east-1c', 'us-east-1d', 'us-east-1e', 'us-east-1f']"],
        id="unknown-zone",
    ),
    pytest.param(
        "pools: [{name: a, instanceTypes: ['c5.*'], standby: [{instanceType: m5.large, count: 1}]}]",
        ["pools[0].standby[0].instanceType: 'm5.large' is not allowed by the pool's instanceTypes ['c5.*'] and architectures ['x86_64']"],
        id="standby-type-outside-pool",
    ),
    pytest.param(
        "pools: [{name: a, standby: [{instanceType: m5.large, count: 1, spot: true}]}]",
        ["pools[0].standby[0].spot: the pool's capacityTypes ['on-demand'] do not include spot"],
        id="standby-spot-not-allowed",
    ),
    pytest.param(
        "nodes: {defaultInstanceType: m99.huge}\n" + MINIMAL,
        ["nodes.defaultInstanceType: unknown instance type 'm99.huge' (catalog us-east-1)"],
        id="unknown-default-type",
    ),
    pytest.param(
        "pools: [{name: a, taints: [{key: x, effect: Sometimes}]}]",
        ["pools[0].taints[0].effect: expected one of 'NoSchedule', 'PreferNoSchedule' or 'NoExecute', got 'Sometimes'"],
        id="bad-taint-effect",
    ),
    pytest.param("cloud: {provider: gce}\n" + MINIMAL, ["cloud.provider: expected one of 'simulated' or 'aws', got 'gce'"], id="unknown-cloud"),
    pytest.param(
        "cloud: {provider: aws, aws: {region: us-east-1}}\n" + MINIMAL,
        ["controllerId: required with cloud.provider aws: it tags this controller's instances, so it must be stable and unique per cluster"],
        id="aws-needs-controller-id",
    ),
    pytest.param(
        "cloud: {provider: aws, aws: {region: us-east-1}}\ncontrollerId: x\n" + MINIMAL,
        ["nodes.bootImageSpec: required with cloud.provider aws: give imageIDs, owners and filters, or launchTemplate"],
        id="aws-needs-an-image",
    ),
    pytest.param(
        "cloud: {provider: aws, aws: {region: us-west-2}}\ncontrollerId: x\nnodes: {bootImageSpec: {imageIDs: [ami-1]}}\n" + MINIMAL,
        [
            "catalog.region: the catalog is for us-east-1 but cloud.aws.region is us-west-2: "
            "make one with `python -m cloud.catalog_gen --region us-west-2 --pricing-api` and set catalog.file"
        ],
        id="catalog-region-mismatch",
    ),
    pytest.param(
        "cloud: {provider: aws}\ncontrollerId: x\n" + MINIMAL,
        ["cloud: provider is 'aws' but there is no 'aws' block"],
        id="aws-without-block",
    ),
    pytest.param(
        "cloud: {provider: simulated, aws: {region: us-east-1}}\n" + MINIMAL,
        ["cloud: has a 'aws' block but provider is 'simulated'"],
        id="block-of-other-cloud",
    ),
    pytest.param(
        "cloud: {provider: aws, aws: {region: Virginia}}\ncontrollerId: x\n" + MINIMAL,
        ["cloud.aws.region: expected an AWS region such as us-east-1, got 'Virginia'"],
        id="bad-region",
    ),
    pytest.param(
        "cluster: {source: kubernetes, kubernetes: {mode: chaos}}\n" + MINIMAL,
        ["cluster.kubernetes.mode: expected one of 'scheduler' or 'provisioner', got 'chaos'"],
        id="bad-mode",
    ),
    pytest.param(
        "cluster: {simulated: {workload: nowhere.yaml}}\n" + MINIMAL,
        [f"cluster.simulated.workload: no such file '{REPO / 'nowhere.yaml'}'"],
        id="missing-workload",
    ),
    pytest.param("status: {listen: 8080}\n" + MINIMAL, ["status.listen: expected a string, got 8080"], id="listen-not-string"),
    pytest.param("status: {listen: everywhere}\n" + MINIMAL, ["status.listen: expected host:port, got 'everywhere'"], id="listen-no-port"),
    pytest.param("catalog: {spotPriceFraction: 1.5}\n" + MINIMAL, ["catalog.spotPriceFraction: must be <= 1.0, got 1.5"], id="spot-fraction"),
    pytest.param("pools: [{name: a, architectures: [sparc]}]", ["pools[0].architectures[0]: expected 'x86_64' or 'arm64', got 'sparc'"], id="bad-arch"),
    pytest.param("pools: [{name: a, limits: {nodes: many}}]", ["pools[0].limits.nodes: expected an integer, got 'many'"], id="limit-not-int"),
    pytest.param("loops: {pool: 0s}\n" + MINIMAL, ["loops.pool: must be >= 0.1, got 0.0"], id="zero-interval"),
    pytest.param(
        "scheduling: {filter: [Zone, Zone], score: [{name: Zone}]}\n" + MINIMAL,
        ["scheduling.filter[1]: 'Zone' is listed twice", "scheduling.score[0]: plugin 'Zone' does not implement score"],
        id="scheduling-profile",
    ),
    pytest.param(
        "scheduling: {pluginArgs: {PodGroup: {scheduleTimeout: forever}}}\n" + MINIMAL,
        ["scheduling.pluginArgs.PodGroup: expected a duration such as 90s, 5m or 1h, got 'forever'"],
        id="plugin-args",
    ),
    pytest.param(
        "scheduling: {score: [{name: MostAllocated, weight: -1}]}\n" + MINIMAL, ["scheduling.score[0].weight: must be >= 0, got -1"], id="negative-weight"
    ),
    pytest.param(
        "scheduling: {pluginArgs: {MostAllocated: {resources: [{name: memory, weight: 0}, {name: nvidia.com/gpu, weight: 1}]}}}\n" + MINIMAL,
        ["scheduling.pluginArgs.MostAllocated.resources[0].weight: expected an integer from 1 to 100, got 0"],
        id="resource-weight",
    ),
    pytest.param(
        "scheduling: {pluginArgs: {LeastAllocated: {resources: [{name: pods, weight: 1}]}}}\n" + MINIMAL,
        [
            "scheduling.pluginArgs.LeastAllocated.resources[0].name: expected cpu, memory, ephemeral-storage, a hugepages size "
            "or an extended resource such as nvidia.com/gpu, got 'pods'"
        ],
        id="resource-weight-name",
    ),
    pytest.param(
        "scheduling: {pluginArgs: {InterPodAffinity: {hardPodAffinityWeight: 101}}}\n" + MINIMAL,
        ["scheduling.pluginArgs.InterPodAffinity.hardPodAffinityWeight: expected an integer from 0 to 100, got 101"],
        id="hard-pod-affinity-weight",
    ),
    pytest.param(
        "cluster: {source: kubernetes, kubernetes: {leaderElection: {leaseDuration: 10s, renewDeadline: 10s}}}\n" + MINIMAL,
        ["cluster.kubernetes.leaderElection: need 0 < retryPeriod (2s) < renewDeadline (10s) < leaseDuration (10s)"],
        id="leader-election-order",
    ),
    pytest.param("- just\n- a list\n", ["the document must be a mapping of settings, got list"], id="not-a-mapping"),
    pytest.param("pools: [{name: a}\n", ["line 2, column 1: not valid YAML: did not find expected ',' or ']'"], id="broken-yaml"),
    pytest.param(
        "nodes: {nameTag: nm}\npools: [{name: " + "p" * 48 + "}]\n",
        [f"pools[0].name: node names would be 64 characters ('nm-{'p' * 48}-' and 12 hex digits), past the 63 of a " + HOSTNAME_LABEL_ADVICE],
        id="node-name-past-hostname-label",
    ),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_invalid_files_name_the_key_path(text, expected):
    assert problems_of(text) == expected


def test_every_problem_is_listed_at_once():
    problems = problems_of("nodes: {maxBootsPerLoop: -1, bootTimeout: x}\npools: [{name: a, standby: [{count: -1}]}]\n")
    assert problems == [
        "nodes.bootTimeout: expected a duration such as 90s, 5m or 1h, got 'x'",
        "nodes.maxBootsPerLoop: must be >= 1, got -1",
        "pools[0].standby[0].count: must be >= 0, got -1",
    ]


SECRET = "kubeadm join --token abcdef.0123456789abcdef"


def test_user_data_is_secret_in_repr_and_dumps():
    text = f"controllerId: x\ncloud: {{provider: aws, aws: {{region: us-east-1, userData: '{SECRET}'}}}}\n{IMAGE}{MINIMAL}"
    config, _ = parse_config(text, "t", REPO)
    assert config.cloud.aws.user_data.get_secret_value() == SECRET
    assert SECRET not in repr(config)
    assert SECRET not in config.model_dump_json()
    assert SECRET not in str(config.model_dump(mode="json"))
    given = config.cloud.aws.for_cloud()  # the plain settings the cloud is given keep it out of their repr too
    assert given.user_data == SECRET
    assert SECRET not in repr(given)
    assert SECRET not in str(given)


def test_credentials_are_refused_without_echoing_them():
    problems = problems_of(f"controllerId: x\ncloud: {{provider: aws, aws: {{region: us-east-1, secretAccessKey: {SECRET!r}}}}}\n{MINIMAL}")
    assert problems == [
        "cloud.aws: secretAccessKey is not accepted: credentials come only from the standard AWS chain (environment, shared files, instance profile)"
    ]
    assert SECRET not in str(problems)


def test_unknown_keys_never_echo_their_value():
    problems = problems_of(f"pools: [{{name: a, password: {SECRET!r}}}]")
    assert problems == ["pools[0].password: unknown key"]


def test_relative_paths_resolve_against_the_file(tmp_path):
    (tmp_path / "w.yaml").write_text("pods: []\n")
    (tmp_path / "p.yaml").write_text("cluster: {simulated: {workload: w.yaml}}\n" + MINIMAL)
    config, _ = load_config(tmp_path / "p.yaml")
    assert config.cluster.simulated.workload == str(tmp_path / "w.yaml")


def test_unreadable_file():
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config("/nonexistent/provider.yaml")


def test_dump_round_trips_through_the_schema(monkeypatch):
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "t0ken-from-the-secret")
    config, _ = load_config(REPO / "config" / "examples" / "aws.yaml")
    dumped = config.model_dump(mode="json", by_alias=True, exclude={"cloud": {"aws": {"user_data"}}})
    assert dumped["nodes"]["bootTimeout"] == "5m"
    assert dumped["pools"][0]["limits"]["memory"] == "6400Gi"
    again = type(config).model_validate(dumped)
    assert again.pools == config.pools
    assert again.nodes == config.nodes


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("provider.yaml", ["pools[0].name: required"]),
        WorkloadError("w.yaml", ["pods[0].at: expected a duration"]),
        InvalidQuantity("resources.cpu", "x", "a quantity"),
        InvalidManifest("spec", "not a mapping"),
        IllegalTransition("n1", "Created", "Claimed"),
    ],
)
def test_an_error_pickles_whole_so_a_worker_process_can_report_it(error: Exception) -> None:
    """``benchmarks/corpus.py`` plays workloads in worker processes: a ConfigError raised in
    one could not be rebuilt in the parent (its ``__init__`` takes two arguments) and the
    pool reported only that a process had died."""
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert vars(again) == vars(error)
