"""bench/sizing.py without a broker: the definitions it writes are the SDK's, byte for byte
(spliced from templates, so checked against the codec), and its inputs are bounded."""

from __future__ import annotations

import pytest

from bench.restore import definition
from bench.sizing import TEMPLATES, RawDefinitions, main
from kadence.settings import KadenceSettings


def test_a_spliced_definition_is_what_the_sdk_writes() -> None:
    raw = RawDefinitions(KadenceSettings(partitions=12))
    for i in (0, TEMPLATES - 1, TEMPLATES, 99_999, 1_234_567, 9_999_999):
        value, key, partition, headers = raw(i)
        assert (value, key, partition, headers) == raw.written(definition(i))
        assert key.endswith(f"/job-{i}".encode())
    raw.check(10_000_000)


def test_a_splice_that_misses_is_caught_before_anything_is_written() -> None:
    raw = RawDefinitions(KadenceSettings(partitions=12))
    value, key, partition, headers = raw.templates[5]
    raw.templates[5] = (value.replace(b"job-5", b"jab-5"), key, partition, headers)
    with pytest.raises(AssertionError, match="job-"):
        raw.check(3 * TEMPLATES)


@pytest.mark.parametrize("jobs", ["0", "-5", "100000001", "many"])
def test_a_job_count_out_of_bounds_is_refused(
    jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--jobs", jobs])
    assert exited.value.code == 2
    assert "--jobs" in capsys.readouterr().err
