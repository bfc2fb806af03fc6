"""Settings: built once at an entry point from KADENCE_* variables, frozen, passed down.

Nothing below an entry point reads the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kadence.models.base import IDENT_RE, MAX_DELIVERIES, MAX_PAYLOAD_BYTES
from kadence.sealing import Keyring
from kadence.settings_api import ApiSettings
from kadence.settings_pools import PoolSettings
from kadence.settings_worker import WorkerSettings
from kadence.sqs_keys import AwsKey
from kadence.target_allow import parse_allowed

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
"""The local broker that `make run` / `make test` start (infra/kafka/kafkactl.py)."""


class KadenceSettings(BaseSettings, WorkerSettings, ApiSettings, PoolSettings):
    """Every knob of a Kadence process. Env: KADENCE_<FIELD>, e.g. KADENCE_NAMESPACE=staging."""

    model_config = SettingsConfigDict(
        env_prefix="KADENCE_", frozen=True, extra="ignore", hide_input_in_errors=True
    )
    """Errors name the field and the rule, never the value: it may be a secret."""

    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    """Kafka bootstrap servers, comma separated."""
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """How every Kafka client of Kadence connects (librdkafka `security.protocol`)."""
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    """SASL login for every client (with KADENCE_KAFKA_SECURITY_PROTOCOL SASL_SSL or
    SASL_PLAINTEXT); the password is never logged or written to a topic."""
    kafka_ssl_ca_location: Path | None = None
    """The CA bundle that signed the brokers' certificates (PEM); None: the system's."""
    kafka_ssl_certificate_location: Path | None = None
    """A client certificate (PEM), for brokers that authenticate clients by TLS."""
    kafka_ssl_key_location: Path | None = None
    kafka_ssl_key_password: SecretStr | None = None
    """The client's private key (PEM) for mutual TLS, with the certificate above, and its
    password if it has one."""
    kafka_options: dict[str, str] = Field(default_factory=dict)
    """Any other librdkafka option for every client, as JSON (KADENCE_KAFKA_OPTIONS=
    '{"socket.keepalive.enable": "true"}'); applied last."""
    namespace: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")] = "kadence"
    """Prefix of every topic name: `<namespace>.schedules` ..., so environments can share a
    cluster and every test gets its own."""
    partitions: Annotated[int, Field(ge=1, le=10_000)] = 12
    """Partitions of the job-keyed, co-partitioned topics (schedules, commands, outcomes, ...)."""
    execution_partitions: Annotated[int, Field(ge=1, le=10_000)] = 12
    """Partitions of the tenant-keyed executions topic."""
    target_topic_partitions: Annotated[int, Field(ge=1, le=10_000)] = 1
    """Partitions of a tenant's Kafka-target topic (`<ns>.to.<tenant>.<topic>`, made at its
    first run). Few: each partition written costs a batch and a produce request per linger
    (50 tenants x 12 partitions were 600 requests where 50 do). Existing topics keep theirs."""
    replication_factor: Annotated[int, Field(ge=1, le=7)] | None = None
    """Copies of each topic Kadence creates (None: the cluster's size, up to 3;
    kadence/replication.py). Below that on a multi-broker cluster it is refused unless
    `allow_under_replicated`."""
    min_insync_replicas: Annotated[int, Field(ge=1, le=7)] | None = None
    """`min.insync.replicas` of the topics Kadence creates (None: 2 with 3 or more copies,
    else 1)."""
    allow_under_replicated: bool = False
    """Create topics with fewer copies than the cluster's size (up to 3) allows."""
    max_payload_bytes: Annotated[int, Field(ge=0, le=MAX_PAYLOAD_BYTES)] = MAX_PAYLOAD_BYTES
    """The largest payload a job or a trigger may carry (bytes, at most 512 KiB): every record
    Kadence writes must fit the broker's limit with its payload in it."""
    client_id: str = "kadence"
    """The Kafka client id the SDK and the tools announce (brokers log and quota by it)."""
    delivery_timeout_s: Annotated[float, Field(gt=0, le=300)] = 30.0
    """How long the SDK waits for the broker to acknowledge a write."""
    state_dir: Path = Path(".run/state")
    """Where processors keep their RocksDB state: <state_dir>/<namespace>/<app>/<instance>/."""
    instance_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")] = "0"
    """Names this process among its app's processes: its transactional id and state folder.
    Two live processes of one app must not share it; a restarted one should keep it."""
    session_timeout_ms: Annotated[int, Field(ge=3_000, le=300_000)] = 6_000
    """How long the group waits for a silent process before moving its partitions: the most of
    a take-over (the brokers' default floor, group.min.session.timeout.ms, is 6 s). Heartbeats
    go from librdkafka's own thread every fifth of it, so a busy loop does not miss them; only
    a host frozen that long loses its partitions."""
    standby: bool = True
    """Schedulers and reapers keep a warm copy of every partition's store they do not own
    (streams/runtime/standby.py): one that takes a partition over restores only the tail."""
    misfire_grace_ms: Annotated[int, Field(ge=0, le=86_400_000)] = 30_000
    """An occurrence noticed later than this after it was due is late: its job's missed-run
    policy decides whether it still fires."""
    command_hold_ms: Annotated[int, Field(ge=0, le=600_000)] = 30_000
    """A command (trigger, pause, ...) for a job whose definition the scheduler has not read
    yet waits this long for it, stored with the scheduler's state: a job created and at once
    triggered has its definition and the trigger on two topics, read in no set order. Then it
    is refused (`unknown_job`, and a `refused` history record). 0: refused at once."""
    fires_per_transaction: Annotated[int, Field(ge=1, le=100_000)] = 5_000
    """Timer firings per transaction at most: a burst is committed in bounded steps."""
    backfill_runs_per_tenant_per_s: Annotated[int, Field(ge=1, le=100_000)] = 500
    """Backfill runs one scheduler process starts per tenant per second at most; a long
    backfill goes on across seconds (and at most 200 runs per job per transaction)."""
    tenant_fires_per_s: Annotated[int, Field(ge=0, le=10_000_000)] = 2_000
    """Scheduled runs one tenant's jobs may fire per second of due time; past it an occurrence
    waits, it is not skipped: its job records `throttled` (naming the cap; once a minute at
    most) and runs in the first second with room, under its missed-run policy (docs/scheduler.md,
    "A tenant's caps"). Counted per scheduler process over the job partitions it owns together,
    each process allowing its share (this times its partitions over KADENCE_PARTITIONS, rounded
    up). 0: no cap."""
    tenant_fires_per_s_by_tenant: dict[str, Annotated[int, Field(ge=0, le=10_000_000)]] = Field(
        default_factory=dict
    )
    """`tenant_fires_per_s` of the tenants named (JSON object tenant -> runs; 0: no cap)."""
    tenant_max_in_flight: Annotated[int, Field(ge=0, le=100_000_000)] = 50_000
    """Runs of one tenant in progress at once (due, no final outcome yet) past which its
    scheduled occurrences wait (`throttled`, as for `tenant_fires_per_s`) until runs end. A
    run dispatched ahead (`dispatch_ahead_ms`) is in progress from its due second (until
    0.21.0, from when it went out: 1 000 per-second jobs 30 s ahead kept about 30 000); a job
    goes out ahead only while the tenant is below the cap, so at most one look-ahead of its
    runs more can come due past it. Counted per scheduler process over the job partitions it
    owns together, each process allowing its share (this times its partitions over
    KADENCE_PARTITIONS, rounded up). 0: no cap."""
    tenant_max_in_flight_by_tenant: dict[str, Annotated[int, Field(ge=0, le=100_000_000)]] = Field(
        default_factory=dict
    )
    """`tenant_max_in_flight` of the tenants named (JSON object tenant -> runs; 0: no cap)."""
    dispatch_ahead_ms: Annotated[int, Field(ge=0, le=50_000)] = 30_000
    """Scheduled occurrences go onto `executions` up to this long before they are due (workers
    wait for `due_at`), so a midnight burst is queued before midnight. A job paused, changed or
    deleted before its due time gets an ExecutionRevoked. 0 dispatches at the due time.
    Jobs whose firing depends on other runs (a running overlap or a concurrency key) always
    wait for the due time."""
    execution_batches: bool = True
    """Write the Kafka-topic executions of one tenant due at the same instant, dispatched in
    one transaction, as one ExecutionBatch record on their executions partition instead of a
    record each (docs/execution.md, "Executions in batches"): fewer records for the
    scheduler to write, the broker to keep and the workers to read. Every worker and reaper
    must be of release 0.13.0 or later while it is on (earlier ones reject a batch, and its
    runs are lost), and every worker of 0.15.0 or later (a 0.13.0-0.14.0 worker restarted
    before a batch is done may run a run revoked out of it): the upgrade procedure's order
    sees to it. On by default since 0.15.0; false writes a record per execution, as before."""
    write_behind_ms: Annotated[int, Field(ge=0, le=300_000)] = 20_000
    """An outcome that changes nothing but its job's runs (most successes) is not written on
    its own: the job's next write carries it, or it is written after this long. A restarted
    scheduler reads up to this much of `outcomes` again (docs/scheduler.md). 0: every outcome
    is written in its transaction."""
    breaker_failure_ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    breaker_min_attempts: Annotated[int, Field(ge=1, le=100_000)] = 10
    breaker_window_ms: Annotated[int, Field(ge=1_000, le=86_400_000)] = 60_000
    breaker_cooldown_ms: Annotated[int, Field(ge=100, le=86_400_000)] = 30_000
    """A tenant's retries pause when at least `breaker_failure_ratio` of at least
    `breaker_min_attempts` attempts in `breaker_window_ms` failed; after the cool-down one retry
    probes, and its success resumes the rest."""
    tenant_shards: dict[str, Annotated[int, Field(ge=1, le=1_000)]] = Field(default_factory=dict)
    """Wide tenants spread over several executions partitions: tenant -> shards (JSON object;
    others 1). One job always lands on one partition. Change it only while the tenant has
    nothing dispatched ahead, or a revocation may miss an execution sent under the old count."""
    redelivery_cap: Annotated[int, Field(ge=1, le=MAX_DELIVERIES)] = 3
    """Deliveries of one attempt whose lease expired (worker died or hung) before the reaper
    gives up and dead-letters it: a job that kills its workers must not take the fleet down."""
    target_allow_cidrs: list[str] = Field(default_factory=list)
    """HTTP and SQS targets of every tenant may reach private, loopback or link-local addresses
    in these networks (JSON list, e.g. ["10.20.0.0/16"]): whatever is there is open to every
    tenant (`target_allow_cidrs_by_tenant` opens a network to one tenant). A network with a port
    allows that port only: "10.20.0.0/16:8443", "[fd00:1::/64]:8443". A cloud metadata address
    (169.254.169.254 ...) needs an entry naming exactly it ("169.254.169.254/32"), never a wider
    network."""
    target_allow_cidrs_by_tenant: dict[str, list[str]] = Field(default_factory=dict)
    """Networks the HTTP and SQS targets of one tenant only may reach although they are private
    (JSON object tenant -> entries in the form of `target_allow_cidrs`), e.g. {"acme":
    ["10.1.0.0/16:443"]} for acme's private SQS endpoint; other tenants' targets stay refused
    there. `target_allow_cidrs` opens its networks to every tenant."""
    webhook_secrets: dict[str, dict[str, SecretStr]] = Field(default_factory=dict)
    """Signing secrets for HTTP targets by tenant: {"<tenant>": {"<secret_ref>": "<secret>"}}
    (JSON object). A job's secret_ref is looked up under its own tenant, then under "*"
    (secrets every tenant may use). Never logged or written."""
    secrets_keys: dict[str, SecretStr] = Field(default_factory=dict)
    """Keys that seal the tenants' connections and signing secrets on the connections topic
    (AES-256-GCM): {"<key id>": "<32 bytes, base64>"} (JSON object), the same on the API and
    every worker. Without one, tenants cannot create connections (the API answers 503). To
    rotate: add a new key, make it `secrets_key_id`, have tenants write their connections
    again (or wait for their rotations), then drop the old key. Never logged or written."""
    secrets_key_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")] | None = (
        None
    )
    """The key of `secrets_keys` that seals new values (by default the only one)."""
    sqs_credentials: dict[str, dict[str, AwsKey]] = Field(default_factory=dict)
    """AWS keys for SQS targets by tenant: {"<tenant>": {"<credentials_ref>": {"access_key_id":
    "AKIA...", "secret_access_key": "...", "session_token": "..." (optional)}}} (JSON object),
    looked up as webhook_secrets are: the job's own tenant, then "*". Never logged or written."""
    handler_modules: list[str] = Field(default_factory=list)
    """Modules a worker imports at start; they register in-process handlers by name, each for
    the tenants it names (connectors/handlers.py)."""
    metrics_port: Annotated[int, Field(ge=-1, le=65_535)] = 0
    """Serve Prometheus metrics on this port (0: off; -1: a port the system picks, logged as
    `metrics listening on <host>:<port>`)."""
    metrics_host: str = "127.0.0.1"
    """The address metrics are served on: loopback unless a deployment exposes them on
    purpose (docker-compose.yml sets 0.0.0.0 inside its container)."""
    history_retention_days: Annotated[int, Field(ge=1, le=3_650)] = 30
    """History older than this is dropped from the query view (the topics keep their own),
    each event first folded into its job's roll-up for its day (streams/views/rollup.py)."""
    history_rollup_days: Annotated[int, Field(ge=1, le=36_500)] = 400
    """How long the query view keeps a job's daily roll-ups: runs by status, decisions, dead
    letters and start lateness per day, shown by `GET /v1/jobs/{job_id}/rollups`."""
    clock_offset_ms: int = 0
    """Added to the wall clock (fault tests jump time with it). Leave 0 in production."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name at least one host:port")
        return value.strip()

    @field_validator("target_allow_cidrs")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            parse_allowed(entry)  # ValueError names the bad entry and the accepted forms
        return value

    @field_validator("target_allow_cidrs_by_tenant")
    @classmethod
    def _tenant_networks(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for tenant, entries in value.items():
            if not IDENT_RE.fullmatch(tenant):
                raise ValueError(
                    f"{tenant!r} is not a tenant identifier (networks for every tenant go in "
                    "KADENCE_TARGET_ALLOW_CIDRS)"
                )
            for entry in entries:
                parse_allowed(entry)
        return value

    @field_validator("webhook_secrets", mode="before")
    @classmethod
    def _secrets_by_tenant(cls, value: object) -> object:
        """The flat {"<secret_ref>": "<secret>"} form of old let any tenant sign with any
        secret: refused, saying how to write it now (never echoing a secret)."""
        if isinstance(value, dict) and any(isinstance(v, str | SecretStr) for v in value.values()):
            raise ValueError(
                'secrets are now keyed by tenant: {"<tenant>": {"<secret_ref>": "<secret>"}}; '
                'put each flat "<secret_ref>": "<secret>" entry under the tenant whose jobs '
                'use it, or under "*" to let every tenant use it'
            )
        return value

    @field_validator("webhook_secrets", "sqs_credentials")
    @classmethod
    def _secret_names(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for tenant, refs in value.items():
            if tenant != "*" and not IDENT_RE.fullmatch(tenant):
                raise ValueError(f'{tenant!r} is neither a tenant identifier nor "*"')
            for ref in refs:
                if not IDENT_RE.fullmatch(ref):
                    raise ValueError(f"{tenant}: {ref!r} is not a name (an identifier)")
        return value

    @model_validator(mode="after")
    def _secrets_keyring(self) -> KadenceSettings:
        """The keys parse and the current one is among them (never echoing a key)."""
        self.keyring()
        return self

    def keyring(self) -> Keyring | None:
        """The keyring of `secrets_keys` (None without keys); raises ValueError on bad keys."""
        keys = {kid: key.get_secret_value() for kid, key in self.secrets_keys.items()}
        for kid in keys:
            if not IDENT_RE.fullmatch(kid):
                raise ValueError(f"secrets_keys: {kid!r} is not a key id (an identifier)")
        return Keyring.from_settings(keys, self.secrets_key_id)

    @field_validator("sqs_credentials")
    @classmethod
    def _shared_keys_bound(
        cls, value: dict[str, dict[str, AwsKey]]
    ) -> dict[str, dict[str, AwsKey]]:
        """A key every tenant may use signs only for the queues it names: else a tenant points
        queue_url at its own host and receives signed requests (and a session token)."""
        for ref, key in value.get("*", {}).items():
            if key.queue_urls is None:
                raise ValueError(
                    f'"*" key {ref!r} has no queue_urls: a key every tenant may use must name '
                    'the queue URL prefixes it signs for, e.g. "queue_urls": '
                    '["https://sqs.eu-west-1.amazonaws.com/123456789012/"] (or move it under '
                    "the tenant whose jobs use it)"
                )
        return value

    @field_validator(
        "worker_tenant_max_running_by_tenant",
        "api_quota_jobs_by_tenant",
        "api_quota_backfill_per_minute_by_tenant",
        "api_quota_triggers_per_minute_by_tenant",
        "api_quota_replays_per_minute_by_tenant",
        "tenant_fires_per_s_by_tenant",
        "tenant_max_in_flight_by_tenant",
    )
    @classmethod
    def _tenant_keys(cls, value: dict[str, int]) -> dict[str, int]:
        for tenant in value:
            if not IDENT_RE.fullmatch(tenant):
                raise ValueError(f"{tenant!r} is not a tenant identifier")
        return value

    @model_validator(mode="after")
    def _kafka_security(self) -> KadenceSettings:
        """A secured connection that cannot work is refused at start-up, saying what is missing
        (never what a secret is)."""
        protocol = self.kafka_security_protocol
        if protocol.startswith("SASL_"):
            missing = [
                f"KADENCE_KAFKA_{name.upper()}"
                for name in ("sasl_mechanism", "sasl_username", "sasl_password")
                if getattr(self, f"kafka_{name}") is None
            ]
            if missing:
                raise ValueError(f"security protocol {protocol} needs {', '.join(missing)}")
        for name in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
            path = getattr(self, f"kafka_{name}")
            if path is not None and not Path(path).is_file():
                raise ValueError(f"KADENCE_KAFKA_{name.upper()}: no file at {path}")
        if (self.kafka_ssl_certificate_location is None) != (self.kafka_ssl_key_location is None):
            raise ValueError(
                "KADENCE_KAFKA_SSL_CERTIFICATE_LOCATION and KADENCE_KAFKA_SSL_KEY_LOCATION go "
                "together (a client certificate and its key)"
            )
        return self

    def kafka_common(self) -> dict[str, str | int | float | bool]:
        """librdkafka settings every client of this process shares: where the cluster is, how
        to connect to it (TLS, SASL) and any pass-through options."""
        common: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.kafka_security_protocol,
        }
        if self.kafka_sasl_mechanism is not None:
            common["sasl.mechanism"] = self.kafka_sasl_mechanism
        if self.kafka_sasl_username is not None:
            common["sasl.username"] = self.kafka_sasl_username
        if self.kafka_sasl_password is not None:
            common["sasl.password"] = self.kafka_sasl_password.get_secret_value()
        files = {
            "ssl.ca.location": self.kafka_ssl_ca_location,
            "ssl.certificate.location": self.kafka_ssl_certificate_location,
            "ssl.key.location": self.kafka_ssl_key_location,
        }
        common.update({k: str(v) for k, v in files.items() if v is not None})
        if self.kafka_ssl_key_password is not None:
            common["ssl.key.password"] = self.kafka_ssl_key_password.get_secret_value()
        common.update(self.kafka_options)
        return common
