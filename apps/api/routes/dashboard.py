"""The dashboard: one static page that reads the API with the visitor's token."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

DASHBOARD = Path(__file__).resolve().parent.parent / "dashboard.html"

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def dashboard() -> HTMLResponse:
    return HTMLResponse(DASHBOARD.read_text())
