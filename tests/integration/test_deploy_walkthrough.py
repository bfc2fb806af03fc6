"""docs/deploy.md's walk-through, run as written (issue 43): on a three-node KRaft cluster of its
own with a SASL_SSL listener (SCRAM, a CA the test makes) and the StandardAuthorizer (nothing
allowed that no ACL allows; `admin` a super user), the blocks of the walk-through's section run
in order, in a shell, in an operator's folder holding `ca.crt` and the `admin.properties` block:
a Kafka user per component and one for the tenant (kafka-configs.sh), the ACLs (`kadence acls
--apply`, and `acls.sh` holding exactly what it created), a token, provisioning, every process,
a job through the API, and the tenant's program (the Python block, run by this Python) producing
to its ingress topic and reading its own topic.

What the test changes, and only that (each substitution must find its text, so a doc that
drops one fails here): the brokers' address (the cluster's SASL_SSL listeners); no
`kubectl port-forward` (the API is on a port of its own, put in KADENCE_API_URL) and the token
of step 4 for its placeholder. What it cannot run is Kubernetes: for a `kubectl apply` line it
reads the files named (from the operator's folder, else the repository) and runs what they
describe (testkit/k8s_pods.py): the provisioning Job's command to its end, then one pod of
each workload, each container as a process with the environment its ConfigMap and Secrets
give it, so each runs as the Kafka user of its own Secret. Step 4's edits of config.yaml are
made to that environment: the brokers, 2 partitions, the API token's hash; and what a pod has
of its own is given to the process: the CA where the Secret is mounted, a state folder, ports
the system picks (a pod's loopback is its own; here two views share one host). Before the Job
runs, a scheduler started as its own user exits 2 (it may not create the topics: the doc says
so). Kafka's `kafka-configs.sh` is KAFKA_HOME's, else a script that runs its class from the
broker's jars as Kafka's does (the test broker is assembled from Maven's jars, without bin/).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from infra.kafka.broker import java_runtime
from infra.kafka.cluster import cluster_configs, start_cluster, stop_cluster
from infra.kafka.config import HERE, Authorizer, BrokerConfig, SecureListener
from testkit import k8s_pods
from testkit.acl_script import bindings_of_script, bindings_on
from testkit.ports import free_ports
from testkit.process_tree import stop_group
from testkit.tls import make_certificates

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.timeout(600),  # three brokers and seven processes: 145 s alone on 2 busy cores
]
REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "deploy.md"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"  # the walk-through's admin.properties
DOC_BROKERS = "kafka-0.kafka:9093,kafka-1.kafka:9093,kafka-2.kafka:9093"
PORT_FORWARD = "kubectl port-forward svc/kadence-api 8080 &\n"
NAMESPACE = "kadence"  # the ConfigMap's, and the topics' the walk-through names
EDITED = ("KADENCE_BOOTSTRAP_SERVERS", "KADENCE_PARTITIONS", "KADENCE_EXECUTION_PARTITIONS")


def walkthrough() -> tuple[str, list[str], str]:
    """The section's `admin.properties` block, its shell blocks in order, and its Python
    block (the tenant's program), dedented."""
    text = DOC.read_text()
    section = text[text.index("## A walk-through: three brokers, SASL_SSL\n") :]
    section = section[: section.index("\n## ")]

    def blocks(lang: str) -> list[str]:
        found = re.findall(rf"```{lang}\n(.*?)\n *```", section, re.S)
        return [textwrap.dedent(b) + "\n" for b in found]

    [props], [program] = blocks("properties"), blocks("python")
    return props, blocks("sh"), program


def swap(text: str, old: str, new: str) -> str:
    assert old in text, f"docs/deploy.md no longer has {old!r}"
    return text.replace(old, new)


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[list[BrokerConfig], Path]]:
    """Three nodes with a SASL_SSL listener each and the StandardAuthorizer; the CA's
    certificate. Stopped also when the start fails."""
    certs = make_certificates(tmp_path / "certs")
    base = BrokerConfig.from_env()
    nodes = cluster_configs(
        BrokerConfig(
            home=tmp_path / "cluster",
            port=free_ports(25),  # three nodes ten ports apart, five each
            cache_dir=base.cache_dir,
            kafka_home=base.kafka_home,
            kafka_version=base.kafka_version,
            secure=SecureListener(certs.keystore, ((ADMIN, ADMIN_PASSWORD),)),
            authorizer=Authorizer((ADMIN,)),
        )
    )
    try:
        start_cluster(nodes, quiet=True)
        yield nodes, certs.ca
    finally:
        stop_cluster(nodes)


def kafka_bin(cfg: BrokerConfig, folder: Path) -> Path:
    """A folder with Kafka's kafka-configs.sh (see the module's docstring)."""
    if cfg.kafka_home is not None and (cfg.kafka_home / "bin" / "kafka-configs.sh").exists():
        return cfg.kafka_home / "bin"
    folder.mkdir(parents=True)
    script = folder / "kafka-configs.sh"
    java, log4j = shlex.quote(java_runtime()), shlex.quote(str(HERE / "log4j2.properties"))
    script.write_text(
        f"#!/bin/sh\nexec {java} -Xmx256m -XX:TieredStopAtLevel=1 "
        f"-Dlog4j2.configurationFile={log4j} -cp {shlex.quote(str(cfg.libs))}/'*' "
        'kafka.admin.ConfigCommand "$@"\n'
    )
    script.chmod(0o755)
    return folder


@dataclass
class Operator:
    """The operator's shell: its folder, its environment (no KADENCE_* of ours), Kafka's bin/
    and the `kadence` command on its PATH, and step 1's BROKERS before every block."""

    folder: Path
    env: dict[str, str]
    prelude: str

    def run(self, block: str, timeout_s: float = 120) -> str:
        proc = subprocess.Popen(
            ["bash", "-ec", self.prelude + block],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_group(proc, signal.SIGKILL)  # bash and what it started
            out, err = proc.communicate()
            raise AssertionError(f"{block}\ntimed out after {timeout_s} s\n{out}{err}") from None
        assert proc.returncode == 0, f"{block}\nexit {proc.returncode}\n{out}{err}"
        return out


@dataclass
class Pods:
    """The containers of the manifests applied so far, each run as a process."""

    folder: Path
    defined: dict[tuple[str, str], dict[str, Any]]
    local: dict[str, str]
    """What a pod has of its own, given to every container (see the module's docstring)."""
    started: list[tuple[str, subprocess.Popen[str], Path]] = field(default_factory=list)

    def apply(self, line: str, base: Path) -> list[dict[str, Any]]:
        """`kubectl apply -f ...`: the files, read and known; the workloads among them."""
        args = shlex.split(line)
        assert args[:2] == ["kubectl", "apply"], line
        files = [args[i + 1] for i, a in enumerate(args) if a == "-f"]
        assert len(files) == args.count("-f") == (len(args) - 2) / 2, line
        paths = [base / f if (base / f).exists() else REPO / f for f in files]
        docs = k8s_pods.load(paths)
        assert all(p.exists() for p in paths) and docs, line
        self.defined |= k8s_pods.by_name(docs)
        return [d for d in docs if d["kind"] in k8s_pods.POD_KINDS]

    def env(self, container: dict[str, Any], pod: str, **extra: str) -> dict[str, str]:
        given = k8s_pods.container_env(container, self.defined, pod)
        assert given["KADENCE_NAMESPACE"] == NAMESPACE
        assert all(name in given for name in [*EDITED, "KADENCE_KAFKA_SSL_CA_LOCATION"])
        assert given["KADENCE_KAFKA_SASL_USERNAME"] == f"kadence-{k8s_pods.role(container)}"
        swaps = {  # a pod's own loopback: what it listens on, here a port the system picks
            "KADENCE_METRICS_HOST": ("0.0.0.0", "127.0.0.1"),
            "KADENCE_API_HOST": ("0.0.0.0", "127.0.0.1"),
            "KADENCE_VIEW_PORT": ("8766", "0"),
            "KADENCE_VIEW_URL": ("http://127.0.0.1:8766", extra.pop("view_url", "")),
        }
        for name, (old, new) in swaps.items():
            if name in given:
                assert given[name] == old, (name, given[name])
                given[name] = new
        state = self.folder / "pods" / pod / container["name"]
        state.mkdir(parents=True, exist_ok=True)
        outer = {k: v for k, v in os.environ.items() if not k.startswith("KADENCE_")}
        return outer | given | self.local | {"KADENCE_STATE_DIR": str(state)} | extra

    def start(self, container: dict[str, Any], pod: str, **extra: str) -> Path:
        log = self.folder / "pods" / f"{pod}.{container['name']}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, *container["command"][1:]],
                cwd=REPO,
                env=self.env(container, pod, **extra),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        self.started.append((f"{pod}/{container['name']}", proc, log))
        return log

    def until(self, log: Path, pattern: str, timeout_s: float = 90) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if found := re.search(pattern, log.read_text(), re.M):
                return found
            if any(p.poll() is not None for name, p, _ in self.started):
                break
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} in {log.name}: {self.logs()}")

    def run_pod(self, workload: dict[str, Any]) -> str:
        """Pod 0 of a workload, its view first (its siblings ask it); the API's URL if any."""
        pod, view_url, api_url = f"{workload['metadata']['name']}-0", "", ""
        ordered = sorted(
            k8s_pods.containers(workload), key=lambda c: k8s_pods.module(c) != "apps.views"
        )
        for c in ordered:
            log = self.start(c, pod, **({"view_url": view_url} if view_url else {}))
            module = k8s_pods.module(c)
            if module == "apps.views":
                view_url = "http://127.0.0.1:" + self.until(log, r"view listening on \S+:(\d+)$")[1]
            elif module == "apps.api":
                api_url = "http://127.0.0.1:" + self.until(log, r"api listening on \S+:(\d+)$")[1]
            else:
                self.until(log, rf"^\S+ {pod}: running on {NAMESPACE}$")
        return api_url

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{log.read_text()[-3000:]}" for n, _, log in self.started)

    def stop(self) -> None:
        for _, proc, _ in reversed(self.started):
            stop_group(proc, signal.SIGTERM)


def test_the_deploy_walkthrough_as_written(
    cluster: tuple[list[BrokerConfig], Path], tmp_path: Path
) -> None:
    nodes, ca = cluster
    props, [brokers, users, acls, token, provision, processes, api], tenant = walkthrough()
    folder = tmp_path / "operator"
    folder.mkdir()
    shutil.copy(ca, folder / "ca.crt")
    for text in (f'username="{ADMIN}" password="{ADMIN_PASSWORD}"', "location=ca.crt"):
        assert text in props, f"the admin.properties block no longer has {text!r}"
    (folder / "admin.properties").write_text(props)
    servers = ",".join(f"127.0.0.1:{n.secure_port}" for n in nodes)
    outer = {k: v for k, v in os.environ.items() if not k.startswith("KADENCE_")}
    path = f"{kafka_bin(nodes[0], tmp_path / 'bin')}:{Path(sys.executable).parent}:{outer['PATH']}"
    shell = Operator(
        folder, outer | {"PATH": path, "PYTHONPATH": str(REPO)}, swap(brokers, DOC_BROKERS, servers)
    )

    shell.run(users)  # 2: a user and a Secret per component, acme's user
    shell.run(acls)  # 3: the ACLs, as the administrator
    admin = AdminClient(
        {
            "bootstrap.servers": servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": ADMIN,
            "sasl.password": ADMIN_PASSWORD,
            "ssl.ca.location": str(ca),
        }
    )
    script = (folder / "acls.sh").read_text()
    lines = [shlex.split(x) for x in script.splitlines() if x and not x.startswith("#")]
    assert lines and all(
        x[:6]
        == [
            "kafka-acls.sh",
            "--bootstrap-server",
            servers,
            "--command-config",
            "admin.properties",
            "--add",
        ]
        for x in lines
    )
    assert bindings_of_script(script) == bindings_on(admin)  # acls.sh: exactly what was made

    said = shell.run(token)  # 4
    api_token = re.search(r"^token:\s+(\S+)$", said, re.M)
    tokens = re.search(r"^configure: KADENCE_API_TOKENS='(.+?)'", said, re.M)
    assert api_token and tokens, said

    local = {
        "KADENCE_BOOTSTRAP_SERVERS": servers,  # step 4's edits of config.yaml
        "KADENCE_PARTITIONS": "2",
        "KADENCE_EXECUTION_PARTITIONS": "2",
        "KADENCE_KAFKA_SSL_CA_LOCATION": str(folder / "ca.crt"),  # the mounted Secret
        "KADENCE_METRICS_PORT": "0",
        "KADENCE_API_PORT": "0",
    }
    pods = Pods(tmp_path, {}, local)
    try:
        apply_line, wait_line = provision.strip().splitlines()  # 6
        jobs = pods.apply(apply_line, folder)
        pods.defined[("Secret", "kadence-api")]["stringData"]["KADENCE_API_TOKENS"] = tokens[1]
        [early] = [  # a scheduler of step 7, started too early
            c
            for d in k8s_pods.load([REPO / "infra/k8s/scheduler.yaml"])
            if d["kind"] == "StatefulSet"
            for c in k8s_pods.containers(d)
        ]
        done = subprocess.run(
            [sys.executable, *early["command"][1:]],
            cwd=REPO,
            env=pods.env(early, "early-0"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        refusal = re.search(
            r"^scheduler: error: cannot create topic kadence\.\S+: .*$", done.stderr, re.M
        )
        assert done.returncode == 2, done
        assert refusal and "TOPIC_AUTHORIZATION_FAILED" in refusal[0], done.stderr
        [job] = jobs
        assert shlex.split(wait_line)[:3] == ["kubectl", "wait", "--for=condition=complete"]
        assert f"job/{job['metadata']['name']}" in shlex.split(wait_line)
        [provisioner] = k8s_pods.containers(job)
        made = subprocess.run(
            [sys.executable, *provisioner["command"][1:]],
            cwd=REPO,
            env=pods.env(provisioner, "kadence-provision-0"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert made.returncode == 0, made
        assert "created" in made.stdout and "kadence.from.acme.schedules\tcreated" in made.stdout

        api_url = ""
        for workload in pods.apply(processes.strip(), folder):  # 7
            api_url = pods.run_pod(workload) or api_url
        assert api_url

        call = swap(swap(api, PORT_FORWARD, ""), "http://127.0.0.1:8080", api_url)
        said = shell.run(swap(call, "<the token of step 4>", api_token[1]), timeout_s=120)
        assert ": succeeded, started" in said, said

        program = f"exec {shlex.quote(sys.executable)} - <<'PROGRAM'\n{tenant}PROGRAM\n"
        records = [json.loads(x) for x in shell.run(program, timeout_s=90).splitlines() if x]
        runs = sorted(r["execution_id"].split("@")[0] for r in records)
        assert runs == ["acme/ping", "acme/report"], records
        for name, proc, log in pods.started:
            assert proc.poll() is None, f"{name} exited: {log.read_text()[-3000:]}"
            assert "AUTHORIZATION_FAILED" not in log.read_text(), name
    finally:
        pods.stop()
