"""The safety invariants over random small configurations (``benchmarks/fuzz_safety.py``
draws the cases and verifies them from what the cloud and the cluster saw): bounded boots,
at most one boot in vain per pod, no operator's node disrupted, no pod off its device, no
pod without a controller lost, no node left in a Capacity Block EC2 reclaims. The benchmark runs thousands of cases; this, a few dozen."""

from __future__ import annotations

import random

import pytest
from bench_modules import load_benchmark
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

fuzz = load_benchmark("fuzz_safety")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_no_random_configuration_breaks_a_safety_invariant(seed: int) -> None:
    provider, workload = fuzz.random_case(random.Random(seed))
    verdict = fuzz.run_case(provider, workload)
    assert verdict.violations == [], (provider, workload)  # (boots among them: at most 2 per pod, more only where an operator forced them)


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(7000284, id="a bare pod landed on a node while its replacement booted"),
        pytest.param(7002000, id="an operator tainted a node while its replacement booted"),
        pytest.param(7001297, id="evicted pods went elsewhere, leaving their replacements idle"),
        pytest.param(11000107, id="a pod no controller makes again was put on a Capacity Block and lost at its end"),
        pytest.param(2026006225, id="a pod booted into a Capacity Block minutes before its drain, then into another"),
        pytest.param(11001168, id="an expired node's replacement cordoned by an operator: a third boot, forced"),
    ],
)
def test_cases_the_fuzz_found(seed: int) -> None:
    provider, workload = fuzz.random_case(random.Random(seed))
    assert fuzz.run_case(provider, workload).violations == []


def test_the_verifier_catches_an_operators_node_taken(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The verifier judges what happened: with the operator's hold switched off, a case
    whose node an operator cordons sees that node stopped, and says so."""
    from nodemanager.controller.state import ClusterState

    provider, workload = fuzz.random_case(random.Random(2000011))
    assert fuzz.run_case(provider, workload).violations == []
    monkeypatch.setattr(ClusterState, "operator_hold", staticmethod(lambda record, planned: ""))
    (violation,) = fuzz.run_case(provider, workload).violations
    assert "(cordoned by an operator) marked for termination: idle" in violation


def test_the_verifier_counts_boots_against_the_pods_that_waited() -> None:
    verdict = fuzz.Verdict(pods=2, boots=5)
    assert verdict.ratio == 2.5
