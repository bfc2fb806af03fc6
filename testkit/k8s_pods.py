"""What the Kubernetes manifests of infra/k8s/ give a container, without Kubernetes: its
command, and its environment from the ConfigMaps and Secrets it names (envFrom, then env; a
field reference is the pod's name), as the kubelet would. tests/test_k8s_manifests.py checks the
manifests with it; tests/integration/test_deploy_walkthrough.py runs each container of the
walk-through as a process with it."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kadence.acls import Role

Doc = dict[str, Any]

ROLE_OF = {
    "apps.scheduler": Role.scheduler,
    "apps.reaper": Role.reaper,
    "apps.worker": Role.worker,
    "apps.ingress": Role.ingress,
    "apps.views": Role.view,
    "apps.api": Role.api,
    "apps.cli": Role.provisioning,
}
"""The component each module runs as (kadence/acls.py): whose rights its Kafka user needs."""
KAFKA_USER_SECRET = "kadence-kafka-"  # noqa: S105 - a name
"""`kadence-kafka-<component>`: a component's Kafka user (docs/deploy.md, step 2)."""
POD_KINDS = ("Deployment", "StatefulSet", "Job")


def load(paths: Iterable[Path]) -> list[Doc]:
    """Every document of the files, in order (a folder: its .yaml, .yml and .json files, as
    `kubectl apply -f <folder>` reads them)."""
    docs: list[Doc] = []
    for path in paths:
        files = (
            sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
            if path.is_dir()
            else [path]
        )
        for file in files:
            docs.extend(d for d in yaml.safe_load_all(file.read_text()) if d)
    return docs


def by_name(docs: Iterable[Doc]) -> dict[tuple[str, str], Doc]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def containers(workload: Doc) -> list[Doc]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def module(container: Doc) -> str:
    """The module a container starts (`python -m <module> ...`)."""
    command = container["command"]
    assert command[:2] == ["python", "-m"], container["name"]
    return str(command[2])


def role(container: Doc) -> Role:
    return ROLE_OF[module(container)]


def secret_data(secret: Doc) -> dict[str, str]:
    """A Secret's values: `stringData` as written, `data` decoded from base64."""
    decoded = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    return decoded | dict(secret.get("stringData", {}))


def container_env(
    container: Doc, defined: Mapping[tuple[str, str], Doc], pod: str
) -> dict[str, str]:
    """The environment Kubernetes gives `container` of pod `pod`, from the `defined` ConfigMaps
    and Secrets (a KeyError names what is missing)."""
    out: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            out |= defined[("ConfigMap", source["configMapRef"]["name"])]["data"]
        else:
            out |= secret_data(defined[("Secret", source["secretRef"]["name"])])
    for entry in container.get("env", []):
        if "value" in entry:
            out[entry["name"]] = entry["value"]
        elif "fieldRef" in entry["valueFrom"]:
            assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", entry
            out[entry["name"]] = pod
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            out[entry["name"]] = secret_data(defined[("Secret", ref["name"])])[ref["key"]]
    return out
