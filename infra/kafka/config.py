"""The local broker's settings: where it keeps its files, which ports it listens on, which
Kafka version it runs, and the KRaft server properties (docker-compose.yml mirrors them)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.1.2"
DEFAULT_PORT = 19092
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MIN_JAVA = 17


class BrokerError(RuntimeError):
    """The local broker could not be fetched, started or reached; the message says what to do."""


def env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


@dataclass(frozen=True)
class SecureListener:
    """A SASL_SSL listener on `port + 4`: TLS with `keystore` (a PEM file: the unencrypted
    PKCS#8 private key, then the certificate chain), SASL PLAIN and SCRAM-SHA-256/512 with
    `users` (name, password); the SCRAM credentials are written when the storage is formatted,
    with the broker's own tool. For tests of secured clients; the default broker has none.
    Without a keystore the listener is SASL_PLAINTEXT: authentication without TLS, enough for
    tests of who may do what (ACLs) without making certificates."""

    keystore: Path | None
    users: tuple[tuple[str, str], ...]

    @property
    def protocol(self) -> str:
        """The listener's name and security protocol (they are the same here)."""
        return "SASL_SSL" if self.keystore is not None else "SASL_PLAINTEXT"


@dataclass(frozen=True)
class Authorizer:
    """KRaft's StandardAuthorizer with nothing allowed that no ACL allows. `super_users` (user
    names) may do anything; so may `User:ANONYMOUS`, the principal of the plaintext listeners
    the controller and the brokers talk to each other on (they must, and a principal per
    listener would need certificates): on a broker with an authorizer, the plaintext client
    port is an administrator's door, the SASL listener is where ACLs apply."""

    super_users: tuple[str, ...] = ()


@dataclass(frozen=True)
class BrokerConfig:
    """Where one local broker keeps its files and which ports it listens on."""

    home: Path
    port: int = DEFAULT_PORT
    kafka_version: str = KAFKA_VERSION
    cache_dir: Path = Path.home() / ".cache" / "kadence"
    kafka_home: Path | None = None
    heap: str = "512m"
    secure: SecureListener | None = None
    authorizer: Authorizer | None = None
    """ACLs enforced (tests of per-component rights); None: everyone may do anything."""
    node_id: int = 1
    voters: tuple[tuple[int, int], ...] = ()
    """(node id, controller port) of every controller of a multi-node cluster (infra/kafka/
    cluster.py); empty: this node alone."""
    cluster_id: str | None = None
    """The KRaft cluster id every node is formatted with (None: a new one for one node)."""

    @classmethod
    def from_env(cls, home: Path | None = None, port: int | None = None) -> BrokerConfig:
        env_home = env("KADENCE_KAFKA_DIR")
        env_port = env("KADENCE_KAFKA_PORT")
        env_cache = env("KADENCE_CACHE_DIR")
        env_kafka_home = env("KAFKA_HOME")
        return cls(
            home=(home or Path(env_home or REPO / ".run" / "kafka")).resolve(),
            port=port or int(env_port or DEFAULT_PORT),
            kafka_version=env("KADENCE_KAFKA_VERSION") or KAFKA_VERSION,
            cache_dir=Path(env_cache) if env_cache else Path.home() / ".cache" / "kadence",
            kafka_home=Path(env_kafka_home) if env_kafka_home else None,
        )

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def proxied_port(self) -> int:
        """A second client listener. It advertises `proxy_port`, so a client that bootstraps
        through a TCP proxy there keeps every later connection going through that proxy."""
        return self.port + 2

    @property
    def proxy_port(self) -> int:
        return self.port + 3

    @property
    def quorum_voters(self) -> str:
        voters = self.voters or ((self.node_id, self.controller_port),)
        return ",".join(f"{n}@127.0.0.1:{p}" for n, p in voters)

    @property
    def internal_replication(self) -> tuple[int, int]:
        """Replication factor and min ISR of the broker's own topics (offsets, transactions)."""
        size = max(1, len(self.voters))
        factor = min(3, size)
        return factor, 2 if factor >= 3 else 1

    @property
    def secure_port(self) -> int:
        return self.port + 4

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def libs(self) -> Path:
        if self.kafka_home is not None:
            return self.kafka_home / "libs"
        return self.cache_dir / f"kafka-{self.kafka_version}" / "libs"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "broker.log"

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"


def server_properties(cfg: BrokerConfig) -> str:
    """The single-node KRaft settings. docker-compose.yml mirrors these one for one."""
    factor, min_isr = cfg.internal_replication
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={cfg.node_id}",
            f"controller.quorum.voters={cfg.quorum_voters}",
            f"listeners=PLAINTEXT://127.0.0.1:{cfg.port},"
            f"CONTROLLER://127.0.0.1:{cfg.controller_port},"
            f"PROXIED://127.0.0.1:{cfg.proxied_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{cfg.port},"
            f"PROXIED://127.0.0.1:{cfg.proxy_port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
            "PROXIED:PLAINTEXT",
            f"log.dirs={cfg.data_dir}",
            "num.partitions=1",
            f"offsets.topic.replication.factor={factor}",
            "offsets.topic.num.partitions=8",
            f"transaction.state.log.replication.factor={factor}",
            f"transaction.state.log.min.isr={min_isr}",
            "transaction.state.log.num.partitions=8",
            f"share.coordinator.state.topic.replication.factor={factor}",
            f"share.coordinator.state.topic.min.isr={min_isr}",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.cleaner.dedupe.buffer.size=16777216",
            "log.retention.check.interval.ms=60000",
            "message.max.bytes=1048588",
            # Index files are preallocated sparse and memory-mapped; the first touch faults in
            # a readahead window of zeros (8 MB on this project's CI disks). 1 MB caps that per
            # new segment (docs/benchmarks-history.md, "The broker's cost was zeroing index pages").
            "log.index.size.max.bytes=1048576",
            *_secure_properties(cfg),
            *_authorizer_properties(cfg),
            "",
        ]
    )


def _secure_properties(cfg: BrokerConfig) -> list[str]:
    """The SASL listener's settings (none without one). They come last: the listener lists
    here replace the ones above (a later key wins in a properties file)."""
    if cfg.secure is None:
        return []
    plain = " ".join(f'user_{name}="{password}"' for name, password in cfg.secure.users)
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    name = cfg.secure.protocol
    lower = name.lower()
    tls = [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={cfg.secure.keystore}",
    ]
    return [
        f"listeners=PLAINTEXT://127.0.0.1:{cfg.port},CONTROLLER://127.0.0.1:{cfg.controller_port},"
        f"PROXIED://127.0.0.1:{cfg.proxied_port},{name}://127.0.0.1:{cfg.secure_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{cfg.port},"
        f"PROXIED://127.0.0.1:{cfg.proxy_port},{name}://127.0.0.1:{cfg.secure_port}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        f"PROXIED:PLAINTEXT,{name}:{name}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.{lower}.plain.sasl.jaas.config="
        f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};",
        f"listener.name.{lower}.scram-sha-256.sasl.jaas.config={scram}",
        f"listener.name.{lower}.scram-sha-512.sasl.jaas.config={scram}",
        *(tls if cfg.secure.keystore is not None else []),
    ]


def _authorizer_properties(cfg: BrokerConfig) -> list[str]:
    """The authorizer's settings (none without one): deny by default, super users as
    `Authorizer` says (the plaintext listeners' ANONYMOUS among them)."""
    if cfg.authorizer is None:
        return []
    supers = ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in cfg.authorizer.super_users)])
    return [
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        f"super.users={supers}",
    ]


def scram_arguments(cfg: BrokerConfig) -> list[str]:
    """`kafka-storage format` arguments that create the listener's SCRAM users."""
    if cfg.secure is None:
        return []
    return [
        arg
        for name, password in cfg.secure.users
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        for arg in ("--add-scram", f"{mechanism}=[name={name},password={password}]")
    ]
