"""The API reference pages (`/docs`, `/redoc`) served from this machine: no CDN, so they work offline.

FastAPI's own `/docs` loads Swagger UI's script and stylesheet from a CDN, so on a machine without
internet access the page is blank. The `fastapi-offline` package (MIT; it depends on FastAPI alone)
ships Swagger UI's and ReDoc's files and serves them from the app (under `/static-offline-docs`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline


def make_app(**settings: Any) -> FastAPI:
    """A FastAPI app (`settings`: FastAPI's keyword arguments) whose `/docs` and `/redoc` need no internet."""
    return FastAPIOffline(**settings)
