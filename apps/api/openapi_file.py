"""`python -m apps.api.openapi_file > docs/openapi.json`: the API's OpenAPI document as served
(apps/api/openapi.py), for the repository's copy."""

from __future__ import annotations

import json
import sys

from apps.api.app import create_app
from kadence.settings import KadenceSettings


def main() -> int:
    text = json.dumps(create_app(KadenceSettings()).openapi(), indent=2, sort_keys=True)
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
