"""The API's routes, one router per concern; app.py includes them in this order: health,
jobs, history, commands, backfill, dead letters, dashboard."""
