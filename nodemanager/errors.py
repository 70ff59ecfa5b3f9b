"""The project's error hierarchy. Control flow matches on these types, never on text.

NodeManagerError
├── InvalidInput                 bad data from a user or the cluster (exit status 2)
│   ├── InvalidQuantity          a resource amount that cannot be parsed or held
│   ├── InvalidManifest          a pod / workload document that cannot be understood
│   └── ConfigError              provider.yaml problems, every one listed by key path
├── IllegalTransition            a node state change the transition table forbids
└── CloudError                   (cloud/errors.py) what a cloud provider refused
"""

from __future__ import annotations

from collections.abc import Sequence


class NodeManagerError(Exception):
    """Base of every error nodemanager raises on purpose."""

    def __reduce__(self) -> tuple:
        """Pickled as made, whatever its own ``__init__`` takes: an error raised in a worker
        process (``benchmarks/corpus.py`` plays each workload in one) reaches its parent
        whole, not as a failure to rebuild it."""
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[NodeManagerError], args: tuple, state: dict) -> NodeManagerError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InvalidInput(NodeManagerError):
    """Input that can never work as given; retrying will not help."""


class InvalidQuantity(InvalidInput, ValueError):
    """A quantity that is malformed, negative, fractional where it must be whole, or too big."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field}: expected {expected}, got {value!r}")


class InvalidManifest(InvalidInput, ValueError):
    """A Kubernetes object (or workload entry) that cannot be turned into a model object."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class ConfigError(InvalidInput):
    """provider.yaml is invalid; ``problems`` holds one ``"key.path: what is wrong"`` each."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        listing = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} error(s)\n{listing}")


class IllegalTransition(NodeManagerError):
    """A node was asked to move along an edge the transition table does not have."""

    def __init__(self, node: str, current: object, target: object) -> None:
        self.node = node
        self.current = current
        self.target = target
        super().__init__(f"node {node}: illegal transition {current} -> {target}")
