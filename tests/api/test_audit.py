"""Scoped tokens and the audit trail live (issue 42, item 8): through the real API served over
HTTP and the `kadence` CLI, a read-only token cannot pause (exit 5, the scope named), a named
operate token pauses and the job's history, its runs and the job itself name that token as the
actor; another tenant's token does not find the job; a command written to Kafka directly (no
actor) shows as `kafka`; tokens added to the token file work without a restart."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apps import cli
from apps.api.app import create_app
from apps.api.auth import token_hash
from kadence.client import KadenceClient
from kadence.models import ResumeJob
from tests.api.conftest import TOKENS, Api, _served

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

NAMED = {
    "kdn-oncall": {"name": "oncall", "tenant": "acme", "scopes": ["read", "operate"]},
    "kdn-viewer": {"name": "viewer", "tenant": "acme", "scopes": ["read"]},
    "kdn-globex": {"name": "globex-ops", "tenant": "globex", "scopes": ["read", "operate"]},
}


def test_a_pause_by_a_named_token_names_it_in_the_job_s_history(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "tokens.json"
    file.write_text(json.dumps({token_hash("kdn-viewer"): NAMED["kdn-viewer"]}))
    tokens: dict[str, Any] = {token_hash(t): tenant for tenant, t in TOKENS.items()}
    tokens |= {token_hash(t): spec for t, spec in NAMED.items() if t != "kdn-viewer"}
    settings = api.settings.model_copy(update={"api_tokens": tokens, "api_tokens_file": file})
    with _served(create_app(settings)) as url:
        monkeypatch.setenv("KADENCE_API_URL", url)
        monkeypatch.setenv("COLUMNS", "200")
        spec = tmp_path / "job.json"
        spec.write_text(json.dumps(api.job()))
        monkeypatch.setenv("KADENCE_TOKEN", "kdn-oncall")
        assert cli.main(["create", "audited", str(spec)]) == 5  # operate cannot create
        assert "token:oncall lacks the 'manage' scope" in capsys.readouterr().err
        monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])  # the first form: every scope
        assert cli.main(["create", "audited", str(spec)]) == 0
        forged = api.http.put(
            "/v1/jobs/audited", json={**api.job(), "actor": "token:boss"}, headers=api.as_("acme")
        )
        assert forged.status_code == 422  # the API says who, never the body

        monkeypatch.setenv("KADENCE_TOKEN", "kdn-viewer")  # from the file
        assert cli.main(["pause", "audited", "--reason", "x"]) == 5
        assert "token:viewer lacks the 'operate' scope" in capsys.readouterr().err
        monkeypatch.setenv("KADENCE_TOKEN", "kdn-globex")
        assert cli.main(["pause", "audited"]) == 4  # another tenant's job is not there

        monkeypatch.setenv("KADENCE_TOKEN", "kdn-oncall")
        assert cli.main(["pause", "audited", "--reason", "db migration"]) == 0
        assert cli.main(["trigger", "audited", "--request-id", "audit-t1"]) == 0
        capsys.readouterr()

        def history() -> list[dict[str, Any]]:
            assert cli.main(["history", "audited", "--json"]) == 0
            return list(json.loads(capsys.readouterr().out))

        events = api.wait(
            lambda: [e for e in history() if e.get("decision") == "paused"] and history(),
            what="the pause in the job's history",
        )
        [paused] = [e for e in events if e.get("decision") == "paused"]
        assert (paused["actor"], paused["reason"]) == ("token:oncall", "db migration")
        assert cli.main(["history", "audited"]) == 0
        assert "token:oncall" in capsys.readouterr().out  # the table's `by` column
        job = api.http.get("/v1/jobs/audited", headers=api.as_("acme")).json()
        legacy = f"token:sha256:{token_hash(TOKENS['acme'])[:12]}"
        assert (job["paused_by"], job["created_by"], job["updated_by"]) == (
            "token:oncall",
            legacy,
            legacy,
        )
        runs = api.wait(
            lambda: [
                r
                for r in api.http.get("/v1/jobs/audited/runs", headers=api.as_("acme")).json()
                if r["execution_id"].endswith("audit-t1") or r.get("actor")
            ],
            what="the triggered run",
        )
        assert runs[0]["actor"] == "token:oncall"

        # straight to Kafka, as kcat or the SDK would: nobody Kadence can name
        with KadenceClient(api.settings) as client:
            client.send(
                ResumeJob(
                    tenant="acme",
                    job_id="audited",
                    request_id="kafka-r1",
                    issued_at=datetime.now(UTC),
                )
            )
        resumed = api.wait(
            lambda: [e for e in history() if e.get("decision") == "resumed"],
            what="the resume from Kafka",
        )
        assert resumed[0]["actor"] == "kafka"

        # a token added to the file works without a restart
        monkeypatch.setenv("KADENCE_TOKEN", "kdn-late")
        assert cli.main(["jobs"]) == 5
        late = {"name": "late", "tenant": "acme", "scopes": ["read"]}
        entries = {token_hash("kdn-viewer"): NAMED["kdn-viewer"], token_hash("kdn-late"): late}
        (tmp_path / "next.json").write_text(json.dumps(entries))
        (tmp_path / "next.json").replace(file)
        api.wait(lambda: cli.main(["jobs"]) == 0, 10, "the new token from the file")
        assert TOKENS["acme"] not in capsys.readouterr().out
