"""Offline validation of the deployment files (no Docker engine or cluster runs on these machines)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def _tool(name: str) -> str:
    exe = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(exe).exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return exe


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_kubernetes_manifest_validates_against_schema(manifest: Path) -> None:
    res = subprocess.run([_tool("kubernetes-validate"), "--strict", str(manifest)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "passed" in res.stdout + res.stderr


def test_validator_rejects_a_broken_manifest(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (K8S / "deployment.yaml").read_text().replace("containerPort: 8000", "containerPort: eight-thousand")
    bad.write_text(text)
    res = subprocess.run([_tool("kubernetes-validate"), "--strict", str(bad)], capture_output=True, text=True)
    assert res.returncode != 0


def test_probes_and_gpu_variant() -> None:
    cpu = (K8S / "deployment.yaml").read_text()
    gpu = (K8S / "deployment-gpu.yaml").read_text()
    assert "path: /ready" in cpu and "path: /health" in cpu
    assert "nvidia.com/gpu: 1" in gpu and "priorart:gpu" in gpu
    kustomization = (K8S / "kustomization.yaml").read_text()
    for name in ("configmap.yaml", "deployment.yaml", "service.yaml", "hpa.yaml", "pvc.yaml"):
        assert name in kustomization


def test_dockerfile_lints_clean() -> None:
    res = subprocess.run([_tool("hadolint"), str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_flags_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nCMD python app.py\n")
    res = subprocess.run([_tool("hadolint"), str(bad)], capture_output=True, text=True)
    assert res.returncode != 0 and "DL3007" in res.stdout


def test_compose_file_declares_service_prometheus_and_index_volume() -> None:
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"priorart", "prometheus", "postgres"}
    assert any("/data/index" in v for v in compose["services"]["priorart"]["volumes"])
    # the watches' database: the service's URL names the postgres service, whose data is a named volume
    url = compose["services"]["priorart"]["environment"]["PRIORART_DATABASE_URL"]
    assert url.startswith("postgresql://") and "@postgres:5432/" in url
    assert any(v.startswith("priorart-watches:") for v in compose["services"]["postgres"]["volumes"])
    assert "priorart-watches" in compose["volumes"]
    prom = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["metrics_path"] == "/metrics"


# ------------------------------------------------------------------------------------------ KubeRay (issue 15)

RAYSERVICE = REPO / "deploy" / "ray" / "rayservice.yaml"


def test_rayservice_serve_config_and_pod_templates_validate(tmp_path: Path) -> None:
    """The RayService CRD is not in the Kubernetes schemas: its Serve config is checked with Ray's own schema,
    its import path is imported, and each pod template is validated as a Kubernetes PodTemplate."""
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(RAYSERVICE.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", "RayService")
    serve_config = yaml.safe_load(doc["spec"]["serveConfigV2"])
    schema = pytest.importorskip("ray.serve.schema", reason="Ray is not installed (pip install -e '.[ray]')")
    parsed = schema.ServeDeploySchema.model_validate(serve_config)
    (app,) = parsed.applications
    module, attr = app.import_path.split(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), attr))
    assert app.args["index_dir"] == "/data/index" and app.route_prefix == "/"
    cluster = doc["spec"]["rayClusterConfig"]
    templates = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    for i, template in enumerate(templates):
        mounts = {m["mountPath"] for c in template["spec"]["containers"] for m in c.get("volumeMounts", [])}
        assert "/data/index" in mounts  # every Ray pod reads the index folder
        path = tmp_path / f"pod-{i}.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"pod-{i}"},
                                        "template": template}))
        res = subprocess.run([_tool("kubernetes-validate"), "--strict", str(path)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr


# ------------------------------------------------------------------------------------------ limits (issue 29)

LIMITS = ("header_timeout_s", "keep_alive_s", "max_connections", "max_header_bytes", "request_timeout_s",
          "max_body_bytes")


@pytest.mark.parametrize("name", LIMITS)
def test_the_deployment_docs_and_configmap_list_each_limit_with_its_default(name: str) -> None:
    """docs/DEPLOYMENT.md's table and the ConfigMap name every connection and request limit with the default
    of service/settings.py (a default changed there and not in the docs fails here)."""
    import re

    yaml = pytest.importorskip("yaml")
    from service.settings import Settings

    default = Settings.model_fields[name].default
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    docs = (REPO / "docs" / "DEPLOYMENT.md").read_text()
    row = re.search(rf"^\| `{name.upper()}` \| ([^|]+) \|", docs, re.M)
    assert row and row.group(1).strip() == shown, f"{name}: docs say {row and row.group(1)!r}, settings {shown}"
    config = yaml.safe_load((K8S / "configmap.yaml").read_text())["data"]
    assert float(config[f"PRIORART_{name.upper()}"]) == float(default)


# ------------------------------------------------------------------------------------------ start-up (issue 35)

START_BUDGET_S = 120
"""How long a pod or container may take to be ready (docs/DEPLOYMENT.md, Start-up: the kernels compiled at load on a
CPU the image's kernel cache does not fit, or a 1M-document index)."""


@pytest.mark.parametrize("name", ["deployment.yaml", "deployment-gpu.yaml"])
def test_the_startup_probe_polls_ready_every_second_within_the_start_budget(name: str) -> None:
    """A pod ready in ~3 s is marked ready within a second of it (was: the readiness probe's first look at 5 s,
    then every 10 s), and the probes give a slow start the documented budget before liveness counts."""
    yaml = pytest.importorskip("yaml")
    docs = list(yaml.safe_load_all((K8S / name).read_text()))
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    startup, ready, live = container["startupProbe"], container["readinessProbe"], container["livenessProbe"]
    assert startup["httpGet"]["path"] == "/ready" and startup["periodSeconds"] == 1
    assert startup["periodSeconds"] * startup["failureThreshold"] == START_BUDGET_S
    assert "initialDelaySeconds" not in ready and "initialDelaySeconds" not in live  # the startup probe gates them
    assert ready["httpGet"]["path"] == "/ready" and live["httpGet"]["path"] == "/health"


def test_the_image_ships_its_kernel_cache_and_its_healthcheck_has_the_same_budget() -> None:
    import re

    text = (REPO / "Dockerfile").read_text()
    assert "PRIORART_KERNEL_CACHE=/opt/priorart/kernel-cache" in text
    assert 'priorart warmup --kernel-cache "$PRIORART_KERNEL_CACHE" --cpu "$KERNEL_CPUS"' in text
    cpus = re.search(r"ARG KERNEL_CPUS=(\S+)", text)
    assert cpus and cpus.group(1).split(",")[-1] == "generic"  # the level the build host runs, every x86-64 CPU
    health = re.search(r"HEALTHCHECK (.*)", text)
    assert health and f"--start-period={START_BUDGET_S}s" in health.group(1)
    assert "--start-interval=1s" in health.group(1)


@pytest.mark.parametrize("name", ["deployment.yaml", "deployment-gpu.yaml"])
def test_the_watch_state_folder_is_a_writable_volume(name: str) -> None:
    """The watches' SQLite state (PRIORART_STATE_DIR) must be writable in a pod whose root file system is read-only
    and whose index volume is mounted read-only."""
    yaml = pytest.importorskip("yaml")
    state = yaml.safe_load((K8S / "configmap.yaml").read_text())["data"]["PRIORART_STATE_DIR"]
    pod = list(yaml.safe_load_all((K8S / name).read_text()))[0]["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert state in mounts and not mounts[state].get("readOnly")
    assert any(v["name"] == mounts[state]["name"] for v in pod["volumes"])


def _rendered() -> list[dict]:
    """The resources `kubectl apply -k deploy/k8s` would apply: `kubectl kustomize` where kubectl is installed, else
    the files kustomization.yaml lists (it lists resources only, no patches: the same documents)."""
    yaml = pytest.importorskip("yaml")
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        out = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, check=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    return [d for name in listed for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _pod_specs(docs: list[dict]) -> dict[str, dict]:
    out = {}
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet"):
            out[d["metadata"]["name"]] = d["spec"]["template"]["spec"]
        elif d["kind"] == "CronJob":
            out[d["metadata"]["name"]] = d["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return out


def test_the_kustomization_renders_with_consistent_names() -> None:
    """Issue 62: the manifests include the watches' database and one writer of the index. Rendered as `kubectl apply
    -k` would (no cluster): every claim, config map and service selector a pod uses is defined, the serving pods and
    the weekly add read the database URL from the secret, the index volume is written by the weekly add only."""
    docs = _rendered()
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {("StatefulSet", "priorart-postgres"), ("Service", "priorart-postgres"),
            ("CronJob", "priorart-weekly-add"), ("Deployment", "priorart")} <= kinds
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    maps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    pods = _pod_specs(docs)
    labels = {name: {k: v for d in docs if d["metadata"]["name"] == name and d["kind"] != "Service"
                     for k, v in d["spec"].get("template", {}).get("metadata", {}).get("labels", {}).items()}
              for name in pods}
    for name, pod in pods.items():
        for v in pod.get("volumes", []):
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in claims, (name, v)
        for c in pod["containers"]:
            for ref in c.get("envFrom", []):
                assert ref["configMapRef"]["name"] in maps, (name, ref)
            env = {e["name"]: e for e in c.get("env", [])}
            if name in ("priorart", "priorart-weekly-add"):
                ref = env["PRIORART_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
                assert (ref["name"], ref["key"]) == ("priorart-secrets", "database-url")
            writes_index = [m for m in c.get("volumeMounts", []) if m["name"] == "index" and not m.get("readOnly")]
            assert bool(writes_index) == (name == "priorart-weekly-add"), name  # one writer
    for svc in (d for d in docs if d["kind"] == "Service"):
        selector = svc["spec"]["selector"]
        assert any(selector.items() <= lab.items() for lab in labels.values()), svc["metadata"]["name"]
    postgres = next(d for d in docs if d["kind"] == "StatefulSet")
    assert ("Service", postgres["spec"]["serviceName"]) in kinds and postgres["spec"]["volumeClaimTemplates"]
    index = next(d for d in docs if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == "priorart-index")
    assert index["spec"]["accessModes"] == ["ReadWriteMany"]
