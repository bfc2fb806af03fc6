"""docker-compose.yml stays the local broker's twin."""

from __future__ import annotations

from pathlib import Path

from infra.compose import container_properties, env_name, render

REPO = Path(__file__).resolve().parents[1]


def test_committed_compose_file_is_generated_from_the_broker_settings() -> None:
    assert (REPO / "docker-compose.yml").read_text() == render()


def test_every_broker_property_reaches_the_container() -> None:
    text = render()
    for prop, value in container_properties().items():
        assert f'{env_name(prop)}: "{value}"' in text


def test_image_env_name_mapping() -> None:
    assert env_name("process.roles") == "KAFKA_PROCESS_ROLES"
    assert env_name("log.cleaner.dedupe.buffer.size") == "KAFKA_LOG_CLEANER_DEDUPE_BUFFER_SIZE"
    assert env_name("a.b_c-d") == "KAFKA_A_B__C___D"


def test_compose_exposes_metrics_on_purpose_and_to_the_host_only() -> None:
    """The processes listen on loopback unless told (KADENCE_METRICS_HOST); in the container
    they must listen on 0.0.0.0 to be forwarded, and the host publishes them on loopback."""
    text = render()
    assert 'KADENCE_METRICS_HOST: "0.0.0.0"' in text
    for port in (9101, 9102, 9103, 9104, 9105):
        assert f'- "127.0.0.1:{port}:{port}"' in text
