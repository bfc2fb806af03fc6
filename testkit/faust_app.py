"""A faust-streaming app for the faust test: one agent on a tenant's execution topic that runs
each execution once through `connectors.consumer.executions` and appends its id to a file.

    KADENCE_FAUST_BOOTSTRAP=127.0.0.1:19092 KADENCE_FAUST_TOPIC=<ns>.to.acme.orders \\
    KADENCE_FAUST_TENANT=acme KADENCE_FAUST_OUT=/tmp/seen python -m testkit.faust_app worker
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import faust

from connectors.consumer import executions

app = faust.App(
    f"kadence-faust-{uuid.uuid4().hex[:8]}",
    broker=f"kafka://{os.environ['KADENCE_FAUST_BOOTSTRAP']}",
    store="memory://",
    web_enabled=False,
    topic_replication_factor=1,
    consumer_auto_offset_reset="earliest",
)
topic = app.topic(os.environ["KADENCE_FAUST_TOPIC"], value_serializer="raw")
out = Path(os.environ["KADENCE_FAUST_OUT"])


@app.agent(topic)
async def run(stream):  # type: ignore[no-untyped-def]
    async for execution in executions(stream, tenant=os.environ["KADENCE_FAUST_TENANT"]):
        with out.open("a") as f:
            f.write(f"{execution.execution_id}\n")


if __name__ == "__main__":
    app.main()
