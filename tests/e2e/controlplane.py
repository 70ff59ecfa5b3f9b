"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler (optional) and kwok playing every kubelet, from the binaries that
``controlplane/build.sh`` builds once into ``~/.cache/nodemanager/controlplane``.

Each process gets random free ports, a folder of its own and a log; ``stop`` ends them by
PID. Authentication is a static token file (an admin, and one token per extra user the tests
ask for); authorization is Node and RBAC, as a real cluster's.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE / "controlplane" / "build.sh"
VERSIONS = ("1.32", "1.37")  # the oldest supported (DRA as v1beta1, behind its gate) and the newest
ADMIN_TOKEN = "nodemanager-e2e-admin"
START_TIMEOUT = 60.0  # seconds each process has to answer


def binaries() -> dict[str, Path]:
    """Build (once; cached) and find every binary: ``etcd``, ``kwok``, ``helm``, ``karpenter`` (the
    side-by-side benchmark's driver of Karpenter's scheduler), and ``<tool>-<minor>`` for each
    Kubernetes version."""
    built = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)  # (its progress is for people: `make controlplane`)
    if built.returncode != 0:
        raise RuntimeError(f"building the control plane failed ({BUILD}):\n{built.stderr[-4000:]}")
    found: dict[str, Path] = {}
    cache = Path(os.environ.get("NODEMANAGER_CACHE", Path.home() / ".cache" / "nodemanager")) / "controlplane"
    for folder in sorted(cache.iterdir()):
        if not (folder / ".complete").exists():
            continue
        name = folder.name.rsplit("-", 1)[0]
        for binary in folder.iterdir():
            if binary.name.startswith("."):
                continue
            key = binary.name if name in ("etcd", "kwok", "helm", "karpenter") else f"{binary.name}-{name.removeprefix('k8s-')}"
            found[key] = binary
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ControlPlane:
    version: str  # "1.32" or "1.37"
    root: Path
    scheduler: bool = False
    users: dict[str, tuple[str, ...]] = field(default_factory=dict)  # extra token users: name -> groups
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    host: str = ""
    _argv: dict[str, list[str]] = field(default_factory=dict)

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])

    def token(self, user: str = "admin") -> str:
        return ADMIN_TOKEN if user == "admin" else f"e2e-token-{user}"

    # -- starting --------------------------------------------------------------------------
    def start(self) -> ControlPlane:
        found = binaries()
        self.root.mkdir(parents=True, exist_ok=True)
        self._keys()
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self._run(
            "etcd",
            [
                str(found["etcd"]),
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--quota-backend-bytes=4294967296",
                "--unsafe-no-fsync",
            ],
        )
        self.etcd = f"http://127.0.0.1:{etcd_port}"
        self._wait_http(f"{self.etcd}/health", "etcd")
        tokens = [f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"']
        tokens += [f'{self.token(user)},{user},{user}-uid,"{",".join(groups)}"' for user, groups in self.users.items()]
        (self.root / "tokens.csv").write_text("\n".join(tokens) + "\n")
        api = [
            str(found[f"kube-apiserver-{self.version}"]),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={self.root / 'certs'}",
            f"--token-auth-file={self.root / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self.root / 'sa.pub'}",
            f"--service-account-signing-key-file={self.root / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            # ConfigMaps are watched straight from etcd (no watch cache), so a test can see
            # what etcd's compaction does to a watch (nodemanager does not watch them).
            "--watch-cache-sizes=configmaps#0",
        ]
        if self.minor < 34:  # DRA served as v1beta1 only, behind its feature gate
            api += ["--feature-gates=DynamicResourceAllocation=true", "--runtime-config=resource.k8s.io/v1beta1=true"]
        self._run("kube-apiserver", api)
        self.host = f"https://127.0.0.1:{api_port}"
        self._wait_http(f"{self.host}/readyz", "kube-apiserver", token=ADMIN_TOKEN)
        kubeconfig = self.kubeconfig()
        controllers = [
            str(found[f"kube-controller-manager-{self.version}"]),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--service-account-private-key-file={self.root / 'sa.key'}",
            f"--root-ca-file={self.root / 'certs' / 'apiserver.crt'}",
            "--leader-elect=false",
            "--controllers=*",
        ]
        if self.minor < 34:
            controllers.append("--feature-gates=DynamicResourceAllocation=true")
        self._run("kube-controller-manager", controllers)
        if self.scheduler:
            scheduler = [
                str(found[f"kube-scheduler-{self.version}"]),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
            ]
            if self.minor < 34:
                scheduler.append("--feature-gates=DynamicResourceAllocation=true")
            self._run("kube-scheduler", scheduler)
        self._run(
            "kwok",
            [
                str(found["kwok"]),
                f"--kubeconfig={kubeconfig}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{free_port()}",
            ],
        )
        return self

    def _keys(self) -> None:
        key, pub = self.root / "sa.key", self.root / "sa.pub"
        if not key.exists():
            subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
            subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)

    def kubeconfig(self) -> Path:
        path = self.root / "admin.kubeconfig"
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters: [{{name: e2e, cluster: {{server: "{self.host}", certificate-authority: "{self.root / "certs" / "apiserver.crt"}"}}}}]
users: [{{name: admin, user: {{token: {ADMIN_TOKEN}}}}}]
contexts: [{{name: e2e, context: {{cluster: e2e, user: admin}}}}]
current-context: e2e
"""
        )
        return path

    def _run(self, name: str, argv: list[str]) -> None:
        log = (self.root / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
        self._argv[name] = argv

    def kubelet(self, node: str) -> subprocess.Popen:
        """A kwok of its own for one Node (annotated ``kwok.x-k8s.io/node: solo``): kill it
        and the node's kubelet is gone (no Lease renewal, no status), as a real one's would be."""
        found = binaries()
        name = f"kwok-{node}"
        argv = [str(found["kwok"]), f"--kubeconfig={self.kubeconfig()}", f"--manage-single-node={node}", f"--server-address=127.0.0.1:{free_port()}"]
        argv.append("--node-lease-duration-seconds=40")
        self._run(name, argv)
        return self.processes[name]

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (as the API server does every
        five minutes), through etcd's HTTP gateway; returns that revision."""
        key = base64.b64encode(b"\0").decode()
        revision = int(self._etcd_call("kv/range", {"key": key, "limit": 1})["header"]["revision"])
        self._etcd_call("kv/compaction", {"revision": revision, "physical": True})
        return revision

    def _etcd_call(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(f"{self.etcd}/v3/{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.loads(reply.read())

    def kill_and_restart_api_server(self) -> None:
        """kill -9 the API server, then start it again as it was (same ports, same etcd)."""
        process = self.processes["kube-apiserver"]
        process.kill()
        process.wait(10)
        self._run("kube-apiserver", self._argv["kube-apiserver"])
        self._wait_http(f"{self.host}/readyz", "kube-apiserver", token=ADMIN_TOKEN)

    def _wait_http(self, url: str, name: str, token: str | None = None) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + START_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise RuntimeError(f"{name} exited with {self.processes[name].returncode}; see {self.root / (name + '.log')}")
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
            try:
                with urllib.request.urlopen(request, timeout=2, context=context if url.startswith("https") else None) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not answer {url} within {START_TIMEOUT:g}s ({last}); see {self.root / (name + '.log')}")

    # -- stopping --------------------------------------------------------------------------
    def stop(self, keep_logs: bool = False) -> None:
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        self.processes.clear()
        if not keep_logs:
            shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-4000:] for p in sorted(self.root.glob("*.log")))
