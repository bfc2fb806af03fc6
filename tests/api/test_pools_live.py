"""Issue 42, item 7, live: a job for the `gpu` pool made with the CLI does not run while only
default-pool workers live, is reported in its history (`waiting_for_pool`, through the API and
`kadence history`), and runs once a gpu worker starts; a default-pool job runs meanwhile; a
job naming a pool the deployment has not got is refused at the door."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps import cli
from testkit.stack import WorkerProcess
from tests.api.conftest import TOKENS, Api, api_stack

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def pooled(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Api, Path]]:
    tmp = tmp_path_factory.mktemp("pools")
    with api_stack(kafka_bootstrap, tmp, pools=["gpu"]) as api:
        yield api, tmp


def _cli(api: Api, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setenv("KADENCE_API_URL", api.url)
    monkeypatch.setenv("KADENCE_TOKEN", TOKENS["acme"])
    monkeypatch.setenv("COLUMNS", "240")
    return cli.main(list(args))


def _runs(api: Api, job_id: str) -> list[dict[str, Any]]:
    got = api.http.get(f"/v1/jobs/{job_id}/runs", headers=api.as_("acme"))
    return got.json()  # type: ignore[no-any-return]


def test_a_gpu_job_waits_is_reported_and_runs_once_a_gpu_worker_joins(
    pooled: tuple[Api, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    api, logs = pooled
    spec = api.job()
    spec["target"] = {"kind": "kafka", "topic": "gpu-out", "pool": "gpu"}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(spec))
    assert _cli(api, monkeypatch, "create", "gpu-job", str(path)) == 0
    assert _cli(api, monkeypatch, "trigger", "gpu-job", "--request-id", "r1") == 0

    h = api.as_("acme")
    api.wait(
        lambda: any(
            e.get("decision") == "waiting_for_pool"
            for e in api.http.get("/v1/jobs/gpu-job/history", headers=h).json()
        ),
        60,
        "the reaper's pool watch to report the run waiting",
    )
    capsys.readouterr()
    assert _cli(api, monkeypatch, "history", "gpu-job") == 0
    assert "waiting_for_pool" in capsys.readouterr().out
    assert not [r for r in _runs(api, "gpu-job") if r["status"] == "succeeded"]

    # the default pool is not held up meanwhile
    default = api.job()
    default["target"] = {"kind": "kafka", "topic": "plain-out"}
    assert api.http.post("/v1/jobs/plain-job", headers=h, json=default).status_code == 201
    assert _cli(api, monkeypatch, "trigger", "plain-job", "--wait", "60") == 0
    assert not [r for r in _runs(api, "gpu-job") if r["status"] == "succeeded"]

    gpu_settings = api.settings.model_copy(update={"worker_pool": "gpu"})
    worker = WorkerProcess(gpu_settings, "gpu0", logs)
    try:
        worker.start()
        [run] = api.wait(
            lambda: [r for r in _runs(api, "gpu-job") if r["status"] == "succeeded"],
            60,
            "the gpu run once a gpu worker joined",
        )
        assert run["execution_id"].endswith("@manual:r1")
    finally:
        worker.stop()


def test_a_pool_the_deployment_has_not_got_is_refused(
    pooled: tuple[Api, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, _ = pooled
    h = api.as_("acme")
    for pool in ("tpu", "GPU", "x" * 300, "gpu\n"):
        spec = api.job()
        spec["target"] = {"kind": "http", "url": f"{api.target.url}/ok", "pool": pool}
        refused = api.http.post("/v1/jobs/no-pool", headers=h, json=spec)
        assert refused.status_code == 422, (pool, refused.text)
    spec = api.job()
    spec["target"] = {"kind": "handler", "name": "echo", "pool": "tpu"}
    path = tmp_path / "tpu.json"
    path.write_text(json.dumps(spec))
    assert _cli(api, monkeypatch, "create", "no-pool", str(path)) == 3
