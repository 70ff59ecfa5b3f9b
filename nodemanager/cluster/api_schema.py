"""The fields of the Kubernetes objects a workload file may hold, as the official client's
models declare them (``attribute_map`` and ``openapi_types``), kept in ``api_schema.json``.

Reading the fields from the models themselves means importing them, and the client's
models are pydantic classes: the ones a pod reaches take 0.4 CPU-s to build, a third of
reading a 2 MB workload. The snapshot is the same data, written by this module from the
client the constraints pin (``python -m nodemanager.cluster.api_schema``), and a test checks
it still equals what that client says.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("api_schema.json")
# the client's type names: "List[V1Container]", "Dict[str, str]", "V1PodSpec", "str"
TYPE_NAMES = re.compile(r"[A-Za-z0-9_]+")


@cache
def models() -> dict[str, dict[str, str]]:
    """Model name -> its JSON field names -> each field's type, as the client writes it."""
    return json.loads(SNAPSHOT.read_text())["models"]


def from_client(roots: tuple[str, ...]) -> dict[str, Any]:
    """The snapshot's content from the installed client: every model ``roots`` reach."""
    from kubernetes.client import models as client_models

    found: dict[str, dict[str, str]] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        cls = getattr(client_models, name)
        found[name] = {json_name: cls.openapi_types[attr] for attr, json_name in cls.attribute_map.items()}
        todo += [t for kind in found[name].values() for t in TYPE_NAMES.findall(kind) if hasattr(client_models, t)]
    return {"client": f"kubernetes {metadata.version('kubernetes')}", "models": dict(sorted(found.items()))}


def main() -> None:
    from nodemanager.cluster.manifests import MODELS

    SNAPSHOT.write_text(json.dumps(from_client(tuple(sorted(set(MODELS.values())))), indent=1, sort_keys=False) + "\n")
    print(f"wrote {SNAPSHOT}")


if __name__ == "__main__":
    main()
