import pytest

from nodemanager.model import Operator, Requirement, SelectorTerm, Taint, TaintEffect, Toleration
from nodemanager.model.selectors import HARD_EFFECTS, terms_match, untolerated

LABELS = {"zone": "a", "gen": "6", "gpu": ""}


@pytest.mark.parametrize(
    ("req", "matches"),
    [
        (Requirement("zone", Operator.IN, ("a", "b")), True),
        (Requirement("zone", Operator.IN, ("b",)), False),
        (Requirement("zone", Operator.NOT_IN, ("b",)), True),
        (Requirement("missing", Operator.NOT_IN, ("b",)), True),
        (Requirement("gpu", Operator.EXISTS), True),
        (Requirement("missing", Operator.EXISTS), False),
        (Requirement("missing", Operator.DOES_NOT_EXIST), True),
        (Requirement("zone", Operator.DOES_NOT_EXIST), False),
        (Requirement("gen", Operator.GT, ("5",)), True),
        (Requirement("gen", Operator.GT, ("6",)), False),
        (Requirement("gen", Operator.LT, ("7",)), True),
        (Requirement("zone", Operator.GT, ("1",)), False),  # not an integer label
        (Requirement("missing", Operator.LT, ("1",)), False),
        (Requirement("metadata.name", Operator.IN, ("node-1",), on_field=True), True),
        (Requirement("metadata.name", Operator.NOT_IN, ("node-1",), on_field=True), False),
    ],
)
def test_requirement_operators(req, matches):
    assert req.matches(LABELS, "node-1") is matches


def test_terms_are_ored_and_requirements_anded():
    yes = Requirement("zone", Operator.IN, ("a",))
    no = Requirement("zone", Operator.IN, ("z",))
    assert terms_match((), LABELS)
    assert terms_match((SelectorTerm((no,)), SelectorTerm((yes,))), LABELS)
    assert not terms_match((SelectorTerm((yes, no)),), LABELS)
    assert not terms_match((SelectorTerm(()),), LABELS)  # an empty term matches nothing


@pytest.mark.parametrize(
    ("tol", "taint", "tolerated"),
    [
        (Toleration("k", "Equal", "v", TaintEffect.NO_SCHEDULE), Taint("k", TaintEffect.NO_SCHEDULE, "v"), True),
        (Toleration("k", "Equal", "other", TaintEffect.NO_SCHEDULE), Taint("k", TaintEffect.NO_SCHEDULE, "v"), False),
        (Toleration("k", "Exists"), Taint("k", TaintEffect.NO_EXECUTE, "v"), True),
        (Toleration("k", "Equal", "v", TaintEffect.NO_EXECUTE), Taint("k", TaintEffect.NO_SCHEDULE, "v"), False),
        (Toleration("", "Exists"), Taint("any", TaintEffect.NO_SCHEDULE), True),
        (Toleration("", "Equal", ""), Taint("any", TaintEffect.NO_SCHEDULE), False),
    ],
)
def test_tolerations(tol, taint, tolerated):
    assert tol.tolerates(taint) is tolerated


def test_untolerated_only_counts_requested_effects():
    taints = (Taint("a", TaintEffect.NO_SCHEDULE), Taint("b", TaintEffect.PREFER_NO_SCHEDULE))
    assert untolerated(taints, (), HARD_EFFECTS) == [taints[0]]
    assert untolerated(taints, (Toleration("a", "Exists"),), HARD_EFFECTS) == []


NS = TaintEffect.NO_SCHEDULE


@pytest.mark.parametrize(
    ("tol", "taint", "tolerated"),
    [
        # The examples of kube's v1.35 announcement of the Gt and Lt operators
        (Toleration("failure-probability", "Lt", "5", TaintEffect.NO_EXECUTE), Taint("failure-probability", TaintEffect.NO_EXECUTE, "2"), True),
        (Toleration("failure-probability", "Lt", "5", TaintEffect.NO_EXECUTE), Taint("failure-probability", TaintEffect.NO_EXECUTE, "15"), False),
        (Toleration("failure-probability", "Lt", "20", TaintEffect.NO_EXECUTE), Taint("failure-probability", TaintEffect.NO_EXECUTE, "15"), True),
        (Toleration("gpu-compute-score", "Gt", "800", NS), Taint("gpu-compute-score", NS, "1000"), True),
        (Toleration("gpu-compute-score", "Gt", "800", NS), Taint("gpu-compute-score", NS, "500"), False),
        (Toleration("gpu-compute-score", "Gt", "800", NS), Taint("gpu-compute-score", NS, "800"), False),  # strictly greater
        # kube's compareNumericValues: a taint value that is no canonical integer is tolerated by neither
        (Toleration("score", "Gt", "1", NS), Taint("score", NS, "high"), False),
        (Toleration("score", "Gt", "1", NS), Taint("score", NS, "0950"), False),
        (Toleration("score", "Gt", "1", NS), Taint("other", NS, "5"), False),
        (Toleration("score", "Gt", "1", TaintEffect.NO_EXECUTE), Taint("score", NS, "5"), False),
    ],
)
def test_numeric_tolerations_compare_the_taints_value_as_kube_does(tol, taint, tolerated):
    """kube's ``Toleration.ToleratesTaint`` (k8s.io/api core/v1): Gt tolerates a taint whose
    value is greater than the toleration's, Lt one whose value is less."""
    assert tol.tolerates(taint) is tolerated


@pytest.mark.parametrize("value", ["0950", "high", "", "1.5"])
def test_a_numeric_toleration_with_a_value_that_is_no_integer_is_refused_with_its_field(value):
    from nodemanager.errors import InvalidManifest
    from nodemanager.model import Pod

    spec = {"containers": [], "tolerations": [{"key": "score", "operator": "Gt", "value": value, "effect": "NoSchedule"}]}
    with pytest.raises(InvalidManifest) as refused:
        Pod.from_manifest({"metadata": {"name": "p"}, "spec": spec})
    assert refused.value.field.endswith("tolerations[0].value")


def test_the_scaler_boots_only_the_pool_whose_taint_a_numeric_toleration_passes():
    import dataclasses

    from builders import binpack_pool, pod, scaler

    from nodemanager.config.schema import Taint as PoolTaint
    from nodemanager.scaler import ClusterSnapshot

    t4 = binpack_pool("t4", taints=[PoolTaint(key="gpu-compute-score", value="500", effect="NoSchedule")])
    a100 = binpack_pool("a100", taints=[PoolTaint(key="gpu-compute-score", value="1000", effect="NoSchedule")])
    trainer = dataclasses.replace(pod("trainer", cpu="500m"), tolerations=(Toleration("gpu-compute-score", "Gt", "800", NS),))
    decision = scaler(t4, a100).compute(ClusterSnapshot((trainer,), ()), 0.0)
    assert [s.pool for s in decision.start] == ["a100"]
