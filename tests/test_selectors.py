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
