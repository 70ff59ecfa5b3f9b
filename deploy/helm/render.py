"""Render the plain manifests of deploy/kubernetes (kubectl apply -f deploy/kubernetes/) and
deploy/kubernetes/monitoring from the chart, so the chart is their one source.

    python deploy/helm/render.py HELM [OUT]      (make manifests runs it)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHART = HERE / "nodemanager"
HEADER = "# Rendered from deploy/helm/nodemanager by `make manifests`: change the chart, not this file.\n"
MONITORING = ("prometheusrule.yaml", "dashboard.yaml")


def render(helm: str, out: Path) -> list[Path]:
    """Write every rendered template to ``out`` (the monitoring ones to ``out/monitoring``)."""
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [helm, "template", "nodemanager", str(CHART), "--namespace", "nodemanager", "-f", str(HERE / "plain-values.yaml"),
             "--set", "prometheusRule.enabled=true,grafanaDashboard.enabled=true", "--output-dir", tmp],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        for path in sorted((Path(tmp) / "nodemanager" / "templates").glob("*.yaml")):
            lines = [line for line in path.read_text().splitlines() if not line.startswith("# Source: ")]
            while lines and lines[0] == "---":
                lines.pop(0)
            target = out / "monitoring" / path.name if path.name in MONITORING else out / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(HEADER + "\n".join(lines).rstrip() + "\n")
            written.append(target)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE.parent / "kubernetes"
    for path in render(sys.argv[1], out):
        print(path)
