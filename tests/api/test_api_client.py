"""Issue 31, item 2: the SDK reads through the API (kadence/api_client.py), so an update never
guesses a version: a job read with its version, every job listed a page at a time, runs and
history, refusals as ApiError with the CLI's exit code."""

from __future__ import annotations

import pytest

from kadence.api_client import ApiClient, ApiError
from tests.api.conftest import TOKENS, Api

pytestmark = [pytest.mark.kafka]


def test_read_a_job_update_it_and_list_every_page(api: Api) -> None:
    with ApiClient(api.url, TOKENS["acme"]) as sdk:
        made = sdk.create("sdk-a", api.job("0 6 * * *"))
        assert (made["job_id"], made["version"]) == ("sdk-a", 1)
        job = sdk.job("sdk-a")
        assert job["version"] == 1 and job["state"] == "active"
        assert job["definition"]["schedule"]["expression"] == "0 6 * * *"
        updated = sdk.update("sdk-a", {**api.job("0 7 * * *"), "description": "later"})
        assert updated["version"] == 2  # the API took the current version and added one
        assert sdk.job("sdk-a")["definition"]["description"] == "later"
        for i in range(4):
            sdk.create(f"sdk-page-{i}", api.job())
        listed = [j["job_id"] for j in sdk.jobs(page=2)]  # three pages and an empty one
        assert {"sdk-a", "sdk-page-0", "sdk-page-3"} <= set(listed)
        assert len(listed) == len(set(listed)) >= 5
        assert sdk.runs("sdk-a") == []
        assert isinstance(sdk.history("sdk-a"), list)
        with pytest.raises(ApiError) as missing:
            sdk.job("no-such-job")
        assert (missing.value.status, missing.value.exit_code) == (404, 4)
        with pytest.raises(ApiError) as exists:
            sdk.create("sdk-a", api.job())
        assert exists.value.status == 409
    with ApiClient(api.url, TOKENS["globex"]) as other, pytest.raises(ApiError) as hidden:
        other.job("sdk-a")  # another tenant's job does not exist for it
    assert hidden.value.status == 404
