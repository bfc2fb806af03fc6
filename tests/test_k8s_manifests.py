"""infra/k8s/: the Kubernetes manifests validate against the Kubernetes API schemas (offline,
kubernetes-validate), and they fit Kadence: every process has one, every module they start
exists, every KADENCE_* variable they set is a setting, every ConfigMap and Secret they name is
defined, stateful processes keep a name and a volume, and nothing scales past the partitions
(issue 30, item 5; docs/deploy.md).

Issue 43: every container runs as its own Kafka user, the principal `kadence acls` grants its
component's rights to, from a Secret `kadence-kafka-<component>` of its own (docs/deploy.md,
step 2, makes them: tests/integration/test_deploy_walkthrough.py runs that step and these
manifests on a secured cluster); the provisioning Job runs `kadence topics --create` as the
provisioning principal, the only one the generated ACLs let create topics."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from apps.cli import build_parser
from apps.stack import PROCESSES
from kadence.acl_principals import principal_of
from kadence.acls import Role
from kadence.settings import KadenceSettings
from testkit import k8s_pods
from testkit.k8s_pods import KAFKA_USER_SECRET, by_name

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "infra/k8s"
KUBERNETES = "1.30"
CUSTOM = {  # not in the Kubernetes schemas: KEDA's and the Prometheus Operator's resources
    "ScaledObject": "keda.sh/",
    "PodMonitor": "monitoring.coreos.com/",
}
SETTINGS = {f"KADENCE_{name.upper()}" for name in KadenceSettings.model_fields}


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((str(path.relative_to(REPO)), doc))
    return out


def workloads() -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for _, d in documents()
        if d["kind"] in ("Deployment", "StatefulSet")
    }


def jobs() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in documents() if d["kind"] == "Job"}


def pods() -> dict[str, dict[str, Any]]:
    """Everything that starts a pod: the processes and the provisioning Job."""
    return workloads() | jobs()


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def config() -> dict[str, str]:
    [cm] = [d for _, d in documents() if d["kind"] == "ConfigMap"]
    return dict(cm["data"])


def defined() -> dict[tuple[str, str], dict[str, Any]]:
    """The manifests' ConfigMaps and Secrets, and each component's Kafka user Secret as
    docs/deploy.md, step 2, makes it (its password aside)."""
    users = {
        ("Secret", f"{KAFKA_USER_SECRET}{r}"): {
            "stringData": {
                "KADENCE_KAFKA_SASL_USERNAME": principal_of(r, {}).removeprefix("User:"),
                "KADENCE_KAFKA_SASL_PASSWORD": "a-generated-password",
            }
        }
        for r in Role
    }
    return by_name(d for _, d in documents()) | users


def container_env(container: dict[str, Any]) -> dict[str, str]:
    return k8s_pods.container_env(container, defined(), "pod-0")


@pytest.mark.parametrize(("path", "doc"), documents(), ids=lambda v: str(v)[:40])
def test_each_manifest_validates_against_the_kubernetes_schemas(
    path: str, doc: dict[str, Any]
) -> None:
    if doc["kind"] in CUSTOM:
        assert doc["apiVersion"].startswith(CUSTOM[doc["kind"]]), path
        return
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_validation_catches_a_mistake() -> None:
    """A field Kubernetes does not have is refused: the check above can fail."""
    broken = dict(workloads()["kadence-worker"])
    broken["spec"] = {**broken["spec"], "replica": 2}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_every_process_has_a_workload_that_starts_a_module_that_exists() -> None:
    started = {
        c["command"][-1]: name
        for name, w in workloads().items()
        for c in containers(w)
        if c["command"][:2] == ["python", "-m"]
    }
    assert set(started) == set(PROCESSES)  # apps.stack's list: everything `make run` starts
    for module in started:
        assert importlib.util.find_spec(module) is not None, module


def test_every_variable_is_a_setting_and_every_reference_is_defined() -> None:
    defined = by_name(d for _, d in documents())
    names = set(config())
    for w in pods().values():
        for c in containers(w):
            names |= {e["name"] for e in c.get("env", [])}
            for source in c.get("envFrom", []):
                kind = "ConfigMap" if "configMapRef" in source else "Secret"
                ref = source.get("configMapRef") or source.get("secretRef")
                if ref["name"].startswith(KAFKA_USER_SECRET):
                    continue  # deploy.md makes it; the next test checks whose it is
                assert (kind, ref["name"]) in defined, ref
                names |= set(defined[(kind, ref["name"])].get("stringData", {}))
            for e in c.get("env", []):
                secret = e.get("valueFrom", {}).get("secretKeyRef")
                if secret:
                    assert secret["key"] in defined[("Secret", secret["name"])]["stringData"]
    assert names - SETTINGS == set(), "not Kadence settings"


def test_every_container_runs_as_its_own_components_kafka_user() -> None:
    """One Secret per component, read by that component's containers alone: the API pod's
    view and the ingress pod's view are the view, the Job is provisioning."""
    readers: dict[str, set[Role]] = {}
    for w in pods().values():
        for c in containers(w):
            role = k8s_pods.role(c)
            users = [
                s["secretRef"]["name"]
                for s in c["envFrom"]
                if s.get("secretRef", {}).get("name", "").startswith(KAFKA_USER_SECRET)
            ]
            assert users == [f"{KAFKA_USER_SECRET}{role}"], c["name"]
            readers.setdefault(users[0], set()).add(role)
            assert container_env(c)["KADENCE_KAFKA_SASL_USERNAME"] == f"kadence-{role}"
    assert set(readers) == {f"{KAFKA_USER_SECRET}{r}" for r in Role if r is not Role.operators}
    assert all(len(roles) == 1 for roles in readers.values()), readers


def test_the_settings_each_container_gets_are_valid_and_its_ca_is_where_it_is_mounted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    [kafka] = [d for _, d in documents() if d["metadata"]["name"] == "kadence-kafka"]
    assert set(kafka["stringData"]) == {"ca.crt"}  # no shared user: each has its own
    ca = tmp_path / "ca.crt"  # where the pods mount the Secret's ca.crt, here
    ca.write_text(kafka["stringData"]["ca.crt"])
    for w in pods().values():
        volumes = {v["name"]: v for v in w["spec"]["template"]["spec"]["volumes"]}
        assert volumes["kafka-ca"]["secret"]["secretName"] == "kadence-kafka"
        for c in containers(w):
            env = container_env(c)
            mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            assert f"{mounts['kafka-ca']}/ca.crt" == env["KADENCE_KAFKA_SSL_CA_LOCATION"]
            env["KADENCE_KAFKA_SSL_CA_LOCATION"] = str(ca)
            for key in [k for k in os.environ if k.startswith("KADENCE_")]:
                monkeypatch.delenv(key)
            for key, value in env.items():  # read as a process reads them: its environment
                monkeypatch.setenv(key, value)
            settings = KadenceSettings()
            assert settings.partitions == int(env["KADENCE_PARTITIONS"])
            assert settings.kafka_common()["sasl.username"] == f"kadence-{k8s_pods.role(c)}"
            if k8s_pods.module(c) == "apps.api":
                assert settings.api_tokens and settings.webhook_secrets


def test_the_provisioning_job_creates_the_topics_and_the_ingress_topics() -> None:
    """`kadence topics --create --ingress <tenant>`, parsed as the CLI parses it; restarted
    on failure (a broker not yet reachable), as the provisioning principal."""
    [job] = jobs().values()
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "OnFailure"
    [c] = spec["containers"]
    assert k8s_pods.module(c) == "apps.cli"
    args = build_parser().parse_args(c["command"][3:])
    assert (args.command, args.create) == ("topics", True)
    assert args.ingress == ["acme"]  # the walkthrough's tenant (docs/deploy.md)


def test_stateful_processes_keep_their_name_and_volume() -> None:
    state_dir = config()["KADENCE_STATE_DIR"]
    for name in ("kadence-scheduler", "kadence-reaper"):
        w = workloads()[name]
        assert w["kind"] == "StatefulSet", name
        [claim] = w["spec"]["volumeClaimTemplates"]
        [c] = containers(w)
        assert {"name": claim["metadata"]["name"], "mountPath": state_dir} in c["volumeMounts"]
    for w in workloads().values():  # every process names itself after its pod
        for c in containers(w):
            if c["name"] == "api":
                continue  # the API keeps no group membership
            ids = [e for e in c["env"] if e["name"] == "KADENCE_INSTANCE_ID"]
            assert ids == [
                {
                    "name": "KADENCE_INSTANCE_ID",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                }
            ], c["name"]


def test_nothing_scales_past_the_partitions_and_metrics_are_where_they_are_scraped() -> None:
    cfg = config()
    assert workloads()["kadence-scheduler"]["spec"]["replicas"] <= int(cfg["KADENCE_PARTITIONS"])
    assert workloads()["kadence-worker"]["spec"]["replicas"] <= int(
        cfg["KADENCE_EXECUTION_PARTITIONS"]
    )
    for name in ("kadence-scheduler", "kadence-reaper", "kadence-worker"):
        [c] = containers(workloads()[name])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["metrics"] == int(cfg["KADENCE_METRICS_PORT"]), name
        assert c["livenessProbe"]["httpGet"]["port"] == "metrics"


def upgrade_procedure() -> str:
    """The commands of docs/operations.md's `## Upgrading` (the one upgrade procedure)."""
    text = (REPO / "docs/operations.md").read_text()
    section = text.split("\n## Upgrading\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```\n(.*?)```", section, re.S))


def strategy(workload: dict[str, Any]) -> str:
    """The update strategy Kubernetes applies (RollingUpdate when the manifest says none)."""
    field = "updateStrategy" if workload["kind"] == "StatefulSet" else "strategy"
    return str(workload["spec"].get(field, {}).get("type", "RollingUpdate"))


def procedure_steps(commands: str) -> dict[str, set[str]]:
    """Per workload, what the procedure does to it: `applied`, `deleted` (its pods, together),
    `rolled` (it waits for a rollout)."""
    steps: dict[str, set[str]] = {}
    for path in re.findall(r"-f (infra/k8s/\S+\.yaml)", commands):
        for doc in yaml.safe_load_all((REPO / path).read_text()):
            if doc and doc["kind"] in ("Deployment", "StatefulSet"):
                steps.setdefault(doc["metadata"]["name"], set()).add("applied")
    for name in re.findall(r"kubectl delete pod -l app\.kubernetes\.io/name=(\S+)", commands):
        steps.setdefault(name, set()).add("deleted")
    for name in re.findall(r"kubectl rollout status \w+/(\S+)", commands):
        steps.setdefault(name, set()).add("rolled")
    return steps


def contradictions(workloads_: dict[str, dict[str, Any]], commands: str) -> list[str]:
    """How the manifests' update strategies disagree with the upgrade procedure."""
    out = []
    steps = procedure_steps(commands)
    for name, w in workloads_.items():
        done = steps.get(name, set())
        if "applied" not in done:
            out.append(f"{name}: the procedure never applies it")
        # a store whose partitions move to the other pods of its group, which then restore
        # them: an older release may not load what a newer one stored (a query view's store
        # is its pod's alone, and its own release reads it, so a view may roll)
        stateful = w["kind"] == "StatefulSet" and any(
            c["command"][-1] in ("apps.scheduler", "apps.reaper") for c in containers(w)
        )
        if stateful and strategy(w) != "OnDelete":
            out.append(f"{name}: keeps a store but rolls one pod at a time ({strategy(w)})")
        if "deleted" in done and strategy(w) != "OnDelete":
            out.append(f"{name}: the procedure deletes its pods, but {strategy(w)} rolls them")
        if strategy(w) == "OnDelete" and "deleted" not in done:
            out.append(f"{name}: OnDelete, but the procedure never deletes its pods")
        if "rolled" in done and strategy(w) != "RollingUpdate":
            out.append(f"{name}: the procedure waits for a rollout that {strategy(w)} never makes")
    unknown = set(steps) - set(workloads_)
    out += [f"{name}: in the procedure, not in infra/k8s" for name in sorted(unknown)]
    return out


def test_the_update_strategies_match_the_upgrade_procedure() -> None:
    assert contradictions(workloads(), upgrade_procedure()) == []


def test_a_strategy_that_contradicts_the_procedure_fails() -> None:
    ws = workloads()
    rolling = {**ws["kadence-scheduler"], "spec": dict(ws["kadence-scheduler"]["spec"])}
    del rolling["spec"]["updateStrategy"]  # the default: one pod at a time
    assert contradictions({**ws, "kadence-scheduler": rolling}, upgrade_procedure()) == [
        "kadence-scheduler: keeps a store but rolls one pod at a time (RollingUpdate)",
        "kadence-scheduler: the procedure deletes its pods, but RollingUpdate rolls them",
    ]
    recreate = {**ws["kadence-worker"], "spec": {**ws["kadence-worker"]["spec"]}}
    recreate["spec"]["strategy"] = {"type": "Recreate"}
    assert contradictions({**ws, "kadence-worker": recreate}, upgrade_procedure()) == [
        "kadence-worker: the procedure waits for a rollout that Recreate never makes"
    ]
    assert "kadence-reaper: the procedure never applies it" in contradictions(
        ws, upgrade_procedure().replace("-f infra/k8s/reaper.yaml", "")
    )


def test_the_procedure_upgrades_readers_before_writers() -> None:
    """Reapers, workers, every scheduler, then the ingress and the API (with its view)."""
    commands = upgrade_procedure()
    order = ["reaper", "worker", "scheduler", "ingress", "api"]
    firsts = [commands.index(f"infra/k8s/{name}.yaml") for name in order]
    assert firsts == sorted(firsts)
    assert commands.index("kubectl delete pod -l app.kubernetes.io/name=kadence-scheduler") < (
        commands.index("infra/k8s/api.yaml")
    )
