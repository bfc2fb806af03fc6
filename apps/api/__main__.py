"""`python -m apps.api`: the HTTP API and dashboard on KADENCE_API_HOST:KADENCE_API_PORT."""

from __future__ import annotations

import logging
import sys

import uvicorn

from apps.api.app import create_app
from kadence.settings import KadenceSettings


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = KadenceSettings()
    if not settings.api_tokens:
        print(
            "api: KADENCE_API_TOKENS is empty, so every request will be refused (401). "
            "Make a token with `kadence token`.",
            file=sys.stderr,
        )
    print(
        f"api: http://{settings.api_host}:{settings.api_port}/ on {settings.namespace}", flush=True
    )
    uvicorn.run(
        create_app(settings), host=settings.api_host, port=settings.api_port, log_level="warning"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
