"""docs/deploy.md's walk-through without a broker (issue 43): the blocks the live test runs are
there with every text it substitutes, the files its `kubectl apply` lines name exist and parse,
step 2 makes for each component the Kafka user and the Secret its pods read (a recording
kafka-configs.sh stands for Kafka's), and a `kadence acls` script reads back as exactly the
bindings `--apply` creates (testkit/acl_script.py, which the live test compares with the
cluster's). tests/integration/test_deploy_walkthrough.py runs it all on a secured cluster."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
from pathlib import Path

from kadence.acl_kafka import binding
from kadence.acl_text import kafka_acls_commands
from kadence.acls import Role, bindings
from testkit import k8s_pods
from testkit.acl_script import as_binding, bindings_of_script
from tests.integration.test_deploy_walkthrough import (
    DOC_BROKERS,
    PORT_FORWARD,
    REPO,
    walkthrough,
)

COMPONENTS = [r for r in Role if r is not Role.operators]


def test_the_blocks_the_live_test_runs_hold_what_it_substitutes() -> None:
    props, [brokers, users, acls, token, provision, processes, api], program = walkthrough()
    assert 'username="admin" password="admin-secret"' in props
    assert "ssl.truststore.location=ca.crt" in props
    assert DOC_BROKERS in brokers
    assert "--command-config admin.properties" in users
    assert "kadence acls --tenant acme --command-config admin.properties > acls.sh" in acls
    assert "kadence acls --tenant acme --apply" in acls
    assert token.strip() == "kadence token --tenant acme"
    for old in (PORT_FORWARD, "http://127.0.0.1:8080", "<the token of step 4>"):
        assert old in api
    assert 'os.environ["BROKERS"]' in program
    apply, wait = provision.strip().splitlines()
    assert wait.split()[:3] == ["kubectl", "wait", "--for=condition=complete"]
    for line in (apply, processes.strip()):
        files = [f for f in shlex.split(line)[3::2] if f != "secrets/"]
        assert shlex.split(line)[:2] == ["kubectl", "apply"]
        assert files and all((REPO / f).is_file() for f in files), line
        assert k8s_pods.load([REPO / f for f in files])


def test_step_2_makes_a_user_and_a_secret_for_each_component(tmp_path: Path) -> None:
    """Each component's Secret names its own user with the password its user was given."""
    _, [brokers, users, *_], _ = walkthrough()
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    recorder = bin_ / "kafka-configs.sh"
    recorder.write_text('#!/bin/sh\nprintf "%s\\0" "$@" >> "$ARGV"; printf "\\n" >> "$ARGV"\n')
    recorder.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "ARGV": str(tmp_path / "argv")}
    subprocess.run(["bash", "-ec", brokers + users], cwd=tmp_path, env=env, check=True)
    runs = [r.split("\0") for r in (tmp_path / "argv").read_text().split("\0\n")[:-1]]
    given: dict[str, str] = {}
    for run in runs:
        pairs = dict(itertools.pairwise(run))
        assert pairs["--bootstrap-server"] == DOC_BROKERS
        assert pairs["--command-config"] == "admin.properties"
        scram = re.fullmatch(r"SCRAM-SHA-512=\[password=([0-9a-f]{48})\]", pairs["--add-config"])
        assert scram, pairs["--add-config"]
        given[pairs["--entity-name"]] = scram[1]
    assert set(given) == {f"kadence-{r}" for r in COMPONENTS} | {"acme"}
    assert (tmp_path / "secrets" / "acme.password").read_text().strip() == given["acme"]
    defined = k8s_pods.by_name(k8s_pods.load([tmp_path / "secrets"]))
    for role in COMPONENTS:
        secret = k8s_pods.secret_data(defined[("Secret", f"kadence-kafka-{role}")])
        user = secret["KADENCE_KAFKA_SASL_USERNAME"]
        assert user == f"kadence-{role}"
        assert secret["KADENCE_KAFKA_SASL_PASSWORD"] == given[user]
    assert len(set(given.values())) == len(given)  # no two users share a password


def test_a_kadence_acls_script_reads_back_as_the_bindings_apply_creates() -> None:
    script = "\n".join(kafka_acls_commands("kadence", ("acme",), {}, "k:9093", "admin.props"))
    made = {as_binding(binding(a)) for a in bindings("kadence", ("acme",))}
    assert bindings_of_script(script) == made
    one_less = "\n".join(script.splitlines()[:-1])  # a line lost: the comparison sees it
    assert bindings_of_script(one_less) < bindings_of_script(script)
