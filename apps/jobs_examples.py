"""One JSON example of each model docs/jobs.md documents, keyed by the model's name.

Each is what a person would write (JSON as the API, `kadence put` and an ingress topic take it);
tests/test_jobs_doc.py validates every one against its model, so an example that a model
change makes invalid fails there, not in a reader's hands.
"""

from __future__ import annotations

from typing import Any

EXAMPLES: dict[str, dict[str, Any]] = {
    "ScheduleDefinition": {
        "tenant": "acme",
        "job_id": "weekday-report",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
        "target": {
            "kind": "http",
            "url": "https://hooks.acme.example/report",
            "secret_ref": "reports",
        },
        "payload": {"report": "daily"},
        "retry": {"max_attempts": 5, "initial_backoff_ms": 2000},
        "timeout_ms": 60000,
        "overlap": "skip",
        "on_failure": [{"job_id": "report-cleanup"}],
        "notify": {"url": "https://chat.acme.example/hooks/oncall", "format": "slack"},
        "labels": {"team": "finance"},
        "description": "weekday report at 09:00 Berlin time",
    },
    "CronSchedule": {
        "kind": "cron",
        "expression": "30 1 * * *",
        "also": ["0 12 * * 6"],
        "timezone": "Europe/London",
        "spread_s": 0,
        "dst_gap": "skip",
        "exclude": [{"kind": "dates", "start": "2026-12-24", "end": "2026-12-26"}],
    },
    "IntervalSchedule": {
        "kind": "interval",
        "every_s": 5400,
        "offset_s": 900,
        "timezone": "Europe/London",
        "exclude": [{"kind": "cron", "expression": "* 0-5 * * *"}],
    },
    "OnceSchedule": {"kind": "once", "run_at": "2026-12-24T18:00:00+01:00"},
    "ExcludeDates": {"kind": "dates", "start": "2026-12-24", "end": "2026-12-26"},
    "ExcludeCron": {"kind": "cron", "expression": "* * * * 0,6"},
    "HttpTarget": {
        "kind": "http",
        "url": "https://api.acme.example/sync",
        "method": "PUT",
        "query": {"source": "kadence"},
        "headers": {"X-Team": "data"},
        "connection": "acme-api",
        "success_statuses": ["2xx", "304"],
        "retryable_statuses": ["429", "5xx"],
        "result_headers": ["etag"],
        "rate_limit": {"per_second": 10, "burst": 5},
    },
    "RateLimit": {"per_second": 0.5, "burst": 2},
    "KafkaTarget": {"kind": "kafka", "topic": "orders", "format": "json"},
    "SqsTarget": {
        "kind": "sqs",
        "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
        "credentials_ref": "acme-aws",
        "message_group_id": "orders",
    },
    "HandlerTarget": {"kind": "handler", "name": "rebuild-index", "pool": "gpu"},
    "RetryPolicy": {
        "max_attempts": 5,
        "initial_backoff_ms": 2000,
        "max_backoff_ms": 600000,
        "multiplier": 3.0,
        "jitter": "full",
    },
    "MissedRunPolicy": {"mode": "all", "catch_up_window_ms": 86400000, "max_catch_up": 24},
    "ChainLink": {"job_id": "publish-report", "pass_result": True},
    "NotifyPolicy": {
        "url": "https://chat.acme.example/hooks/oncall",
        "format": "slack",
        "on": ["dead_lettered", "paused"],
        "rate_limit": {"per_second": 0.1, "burst": 3},
    },
}
