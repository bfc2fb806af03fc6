"""`make run`: the embedded single-node Kadence — a local broker, the topics, every process.

Starts the local broker (unless KADENCE_BOOTSTRAP_SERVERS names a cluster), provisions the
namespace's topics, starts each Kadence process, and runs until Ctrl-C or SIGTERM. It stops
what it started, and nothing else.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from pydantic import SecretStr

from apps.processes import ChildProcess, stop_event
from kadence.errors import KadenceError
from kadence.provisioning import provision, provision_ingress
from kadence.sealing import new_key
from kadence.settings import KadenceSettings
from kadence.topics import all_topics, partitions_of

if TYPE_CHECKING:
    from infra.kafka.kafkactl import BrokerConfig

PROCESSES = (
    "apps.scheduler",
    "apps.reaper",
    "apps.worker",
    "apps.views",
    "apps.ingress",  # after the view: it asks the view for its tenants' job counts (the quota)
    "apps.api",
)
DEV_TOKEN_FILE = Path(".run/dev-token")
DEV_SECRETS_KEY_FILE = Path(".run/secrets-key")
DEV_WEBHOOK_SECRET_FILE = Path(".run/dev-webhook-secret")
DEV_TENANT = "demo"
DEV_SECRET_REF = "demo-hooks"  # noqa: S105 - the name jobs give, not a secret
DEV_LOOPBACK = "127.0.0.1/32"
METRICS_PORTS = {
    "apps.scheduler": 9101,
    "apps.reaper": 9102,
    "apps.worker": 9103,
    "apps.views": 9104,
    "apps.ingress": 9105,
}
"""Where `make run` serves each process's /metrics (infra/prometheus/prometheus.yml scrapes
these; the API serves its own on its port). KADENCE_METRICS_PORT=0 turns them off."""


def start_local_broker() -> tuple[str, BrokerConfig | None]:
    """Start infra/kafka's broker. Returns its bootstrap, and its config if we started it."""
    try:
        from infra.kafka import kafkactl  # noqa: PLC0415 - dev tree only, not in the wheel
    except ImportError:
        raise KadenceError(
            "the local broker tooling (infra/kafka) is not part of this copy of Kadence. "
            "Fix: run from a source checkout, or set KADENCE_BOOTSTRAP_SERVERS to your cluster."
        ) from None
    cfg = kafkactl.BrokerConfig.from_env()
    was_running = kafkactl.broker_answers(cfg.bootstrap, timeout=1.0)
    try:
        bootstrap = kafkactl.start(cfg)
    except kafkactl.BrokerError as exc:
        raise KadenceError(str(exc)) from exc
    return bootstrap, None if was_running else cfg


def stop_local_broker(cfg: BrokerConfig) -> None:
    from infra.kafka import kafkactl  # noqa: PLC0415

    kafkactl.stop(cfg)


def describe(settings: KadenceSettings, created: list[str]) -> None:
    print(
        f"kadence: namespace '{settings.namespace}' ready on {settings.bootstrap_servers} "
        f"({len(created)} topics created)"
    )
    for spec in all_topics(settings):
        print(
            f"  {spec.name(settings.namespace):<34} {partitions_of(spec, settings):>3} partitions"
            f"  {spec.cleanup:<8} {spec.purpose}"
        )
    sys.stdout.flush()


def dev_tokens(settings: KadenceSettings) -> KadenceSettings:
    """Without KADENCE_API_TOKENS, one token for the tenant `demo` (kept in .run/dev-token so
    it survives restarts), so the dashboard and the CLI work out of the box."""
    if settings.api_tokens:
        return settings
    from apps.api.auth import new_token, token_hash  # noqa: PLC0415

    token = kept_private(DEV_TOKEN_FILE, lambda: new_token()[0])
    url = f"http://{settings.api_host}:{settings.api_port}"
    print(
        f"kadence: no KADENCE_API_TOKENS set; a development token for tenant 'demo' is in "
        f"{DEV_TOKEN_FILE}\n"
        f"kadence: dashboard {url}/#token=<that token>   API {url}/docs   "
        f"CLI: export KADENCE_TOKEN=$(cat {DEV_TOKEN_FILE})"
    )
    return settings.model_copy(update={"api_tokens": {token_hash(token): "demo"}})


def dev_webhooks(settings: KadenceSettings) -> KadenceSettings:
    """For the `demo` tenant of a development run: a signing secret named `demo-hooks` (kept in
    .run/dev-webhook-secret, which `kadence receive --secret-file` reads), and its HTTP targets
    allowed to reach 127.0.0.1, where `kadence receive` listens. Loopback stays refused to every
    other tenant; either is left as it is when the settings already give demo one."""
    secrets_now = dict(settings.webhook_secrets)
    demo_secrets = dict(secrets_now.get(DEV_TENANT, {}))
    if DEV_SECRET_REF not in demo_secrets:
        secret = kept_private(DEV_WEBHOOK_SECRET_FILE, lambda: secrets.token_urlsafe(32))
        demo_secrets[DEV_SECRET_REF] = SecretStr(secret)
        secrets_now[DEV_TENANT] = demo_secrets
    allowed = dict(settings.target_allow_cidrs_by_tenant)
    allowed.setdefault(DEV_TENANT, [DEV_LOOPBACK])
    print(
        f"kadence: tenant '{DEV_TENANT}' signs webhooks with secret_ref '{DEV_SECRET_REF}' (its "
        f"value is in {DEV_WEBHOOK_SECRET_FILE}) and may call {', '.join(allowed[DEV_TENANT])}"
    )
    return settings.model_copy(
        update={"webhook_secrets": secrets_now, "target_allow_cidrs_by_tenant": allowed}
    )


def kept_private(path: Path, make: Callable[[], str]) -> str:
    """The value kept in `path`, made by `make` and written owner-only when there is none yet.
    Two `make run`s starting at once agree on one value: the file is created exclusively, and
    the one that finds it there reads what the other wrote (waiting a moment if it is still
    empty). A file left readable by others (an older copy) is narrowed first."""
    for _ in range(100):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            continue
        except FileExistsError:
            path.chmod(0o600)
            value = path.read_text().strip()
            if value:
                return value
            time.sleep(0.05)  # another process created it and is writing it
            continue
        value = make()
        with os.fdopen(fd, "w") as file:
            os.fchmod(fd, 0o600)
            file.write(value + "\n")
        return value
    raise KadenceError(f"{path} stays empty: delete it and start again")


def dev_secrets_key(settings: KadenceSettings) -> KadenceSettings:
    """Without KADENCE_SECRETS_KEYS, a key for a development run (kept in .run/secrets-key,
    owner-only), so tenants can make connections (`kadence connection-put`) at once; the
    connections it sealed open again in the next run."""
    if settings.secrets_keys:
        return settings
    key = kept_private(DEV_SECRETS_KEY_FILE, new_key)
    print(f"kadence: connections are sealed with the development key in {DEV_SECRETS_KEY_FILE}")
    return settings.model_copy(update={"secrets_keys": {"dev": SecretStr(key)}})


def view_token(settings: KadenceSettings) -> KadenceSettings:
    """Without KADENCE_VIEW_TOKEN, a random one for this run, given to every child: the query
    view answers only the API that shows it."""
    if settings.view_token.get_secret_value():
        return settings
    return settings.model_copy(update={"view_token": SecretStr(secrets.token_urlsafe(32))})


def start_processes(settings: KadenceSettings, procs: list[ChildProcess]) -> None:
    """Every Kadence process of the single-node default, each pointed at the same cluster,
    added to `procs` as it starts (so the caller stops them even if a later one fails).
    With KADENCE_VIEW_PORT=0 the ingress and the API are told the port the view announced."""
    metrics_off = os.environ.get("KADENCE_METRICS_PORT") == "0"
    for module in PROCESSES:
        port = 0 if metrics_off else METRICS_PORTS.get(module, 0)
        proc = ChildProcess(module, settings.model_copy(update={"metrics_port": port}))
        procs.append(proc.start())
        print(
            f"kadence: {module.split('.')[-1]} started (pid {proc.proc.pid if proc.proc else '?'})"
        )
        if module == "apps.views" and settings.view_port == 0:
            try:
                view_port = proc.listening("view", timeout=120)
            except (RuntimeError, TimeoutError) as exc:
                raise KadenceError(f"the query view did not start: {exc}") from exc
            settings = settings.model_copy(update={"view_url": f"http://127.0.0.1:{view_port}"})


def wait_ready(procs: list[ChildProcess], stop: threading.Event, timeout_s: float = 180) -> str:
    """Wait until the API answers /readyz with 200 (the broker answers, the query view has
    caught up and reads on), so "ready" means a write through the API is answered and shown.
    Returns the API's URL. Fails if a process exits meanwhile or the time runs out."""
    api = next(p for p in procs if p.module == "apps.api")
    try:
        port = api.listening("api", timeout=60)
    except (RuntimeError, TimeoutError) as exc:
        raise KadenceError(f"the API did not start: {exc}") from exc
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    said = False
    problems: object = "no answer yet"
    while not stop.is_set() and time.monotonic() < deadline:
        for proc in procs:
            if not proc.running:
                raise KadenceError(f"{proc.module} exited while starting: {proc.output()[-500:]}")
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
            if r.status_code == 200:
                return url
            problems = r.json().get("problems", r.status_code)
        except (httpx.HTTPError, ValueError) as exc:
            problems = exc
        if not said:
            print("kadence: waiting for the query view to catch up ...", flush=True)
            said = True
        stop.wait(0.5)
    raise KadenceError(f"not ready after {timeout_s:.0f} s: {problems}")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    stop = stop_event()
    started: BrokerConfig | None = None
    procs: list[ChildProcess] = []
    try:
        if os.environ.get("KADENCE_BOOTSTRAP_SERVERS"):
            settings = KadenceSettings()
            print(f"kadence: using the Kafka cluster at {settings.bootstrap_servers}")
        else:
            bootstrap, started = start_local_broker()
            settings = KadenceSettings(bootstrap_servers=bootstrap)
        describe(settings, provision(settings))
        dev_tenant = not settings.api_tokens
        settings = dev_secrets_key(view_token(dev_tokens(settings)))
        if dev_tenant:  # docs/kafka.md's kcat example writes to demo's ingress topic
            settings = dev_webhooks(settings)
            provision_ingress(settings, DEV_TENANT)
        start_processes(settings, procs)
        url = wait_ready(procs, stop)
        print(f"kadence: ready at {url}. Ctrl-C stops what this command started.", flush=True)
        while not stop.wait(1.0):
            for proc in procs:
                if not proc.running:
                    print(f"kadence: {proc.module} exited; stopping everything", flush=True)
                    stop.set()
    except KadenceError as exc:
        print(f"kadence: error: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        for proc in procs:
            proc.stop()
        if started is not None:
            stop_local_broker(started)
    print("kadence: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
