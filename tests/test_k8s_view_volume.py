"""infra/k8s/: every query view keeps its store across pod restarts, so a restart resumes from
the offsets stored with it (streams/views/materializer.py) instead of reading every topic
again, which at 10 M jobs takes tens of minutes (docs/operations.md, "Sizing"): its pod is a
StatefulSet's (a stable name: the view's store folder is named after KADENCE_INSTANCE_ID) and
its store is on the pod's own claim, mounted where KADENCE_STATE_DIR points."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_k8s_manifests import config, containers, workloads

# bench/sizing.py at 10 M jobs, 2026-12-05 (docs/operations.md, "Sizing"): the store at its
# largest while it was rebuilt (du), and the view's peak RSS
STORE_10M_GIB = 2_880 / 1024
PEAK_RSS_10M_GIB = 391 / 1024


def views() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each workload running a query view: the workload and its view container."""
    return {
        name: (w, c)
        for name, w in workloads().items()
        for c in containers(w)
        if c["command"][-1] == "apps.views"
    }


def test_there_is_a_view_beside_the_api_and_beside_the_ingress() -> None:
    assert set(views()) == {"kadence-api", "kadence-ingress"}


@pytest.mark.parametrize("workload", ["kadence-api", "kadence-ingress"])
def test_each_view_keeps_its_store_on_a_claim_of_its_pod(workload: str) -> None:
    state_dir = config()["KADENCE_STATE_DIR"]
    w, view = views()[workload]
    assert w["kind"] == "StatefulSet"
    claims = {t["metadata"]["name"]: t for t in w["spec"]["volumeClaimTemplates"]}
    mounted = {m["name"] for m in view["volumeMounts"] if m["mountPath"] == state_dir}
    assert len(mounted) == 1
    [name] = mounted
    assert name in claims, "the store is on a volume that outlives the pod"
    assert claims[name]["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert name not in {v["name"] for v in w["spec"]["template"]["spec"].get("volumes", [])}


@pytest.mark.parametrize("workload", ["kadence-api", "kadence-ingress"])
def test_each_view_has_the_memory_and_disk_measured_at_10_m_jobs(workload: str) -> None:
    """At least what bench/sizing.py measured at 10 M jobs (docs/operations.md, "Sizing")."""
    w, view = views()[workload]
    [claim] = [
        t for t in w["spec"]["volumeClaimTemplates"] if t["metadata"]["name"] == "view-state"
    ]
    assert gib(claim["spec"]["resources"]["requests"]["storage"]) >= STORE_10M_GIB
    assert gib(view["resources"]["limits"]["memory"]) >= PEAK_RSS_10M_GIB


def gib(quantity: str) -> float:
    units = {"Mi": 1 / 1024, "Gi": 1.0, "Ti": 1024.0}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity.removesuffix(unit)) * factor
    raise ValueError(f"{quantity!r}: Mi, Gi or Ti expected")
