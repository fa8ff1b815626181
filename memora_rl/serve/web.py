"""The web page: graph list, search with channel scores, entry pages, the walk viewer and the eval report.

Server-rendered Jinja2 templates; the walk viewer alone uses a little JavaScript (static/walk.js)
to call /v1/retrieve and step through the walk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates

from memora_rl.errors import GraphError
from memora_rl.serve.api import entry_detail, search_graph, service_of

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
REPORT_FILES = ("results.md", "compare.md", "comparison.md")
"""Markdown tables the report page shows from each run folder, in this order."""

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    """Every served graph with its counts and a search box."""
    service = service_of(request)
    graphs = [service.graphs.summary(graph_id) for graph_id in service.graphs.graph_ids()]
    return TEMPLATES.TemplateResponse(request, "index.html", {"graphs": graphs, "policy": service.policy.name})


@router.get("/graphs/{graph}", response_class=HTMLResponse)
def graph_page(request: Request, graph: str, q: Annotated[str, Query()] = "", k: int = 10) -> HTMLResponse:
    """Search one graph: fused results with their channel scores."""
    service = service_of(request)
    summary = service.graphs.summary(graph)
    results = search_graph(service, graph, q, max(1, min(k, 100))) if q.strip() else []
    return TEMPLATES.TemplateResponse(request, "graph.html", {"graph": summary, "q": q, "results": results})


@router.get("/graphs/{graph}/entries/{entry_id}", response_class=HTMLResponse)
def entry_page(request: Request, graph: str, entry_id: str) -> HTMLResponse:
    """One entry: abstraction, value, merge history, anchors, linked entries, episode text."""
    detail = entry_detail(service_of(request), graph, entry_id)
    return TEMPLATES.TemplateResponse(request, "entry.html", {"graph": graph, "detail": detail})


@router.get("/walk", response_class=HTMLResponse)
def walk_page(request: Request, graph: str = "", question: str = "") -> HTMLResponse:
    """The walk viewer: run a live retrieve and step through it (states drawn by static/walk.js)."""
    service = service_of(request)
    context = {"graphs": service.graphs.graph_ids(), "graph": graph, "question": question,
               "policy": service.policy.name}  # fmt: skip
    return TEMPLATES.TemplateResponse(request, "walk.html", context)


def _report_runs(runs_dir: Path) -> list[dict]:
    """Run folders under `runs_dir` holding a Markdown table, with their table text and PNG plots."""
    runs = []
    for folder in sorted({path.parent for name in REPORT_FILES for path in runs_dir.rglob(name)}):
        tables = [(folder / name).read_text(encoding="utf-8") for name in REPORT_FILES if (folder / name).is_file()]
        plots = [str(path.relative_to(runs_dir)) for path in sorted(folder.glob("*.png"))]
        runs.append({"name": str(folder.relative_to(runs_dir)) or ".", "tables": tables, "plots": plots})
    return runs


@router.get("/report", response_class=HTMLResponse)
def report_page(request: Request) -> HTMLResponse:
    """Eval reports found under `--runs-dir`: each run's table (eval compare or results) and its plots."""
    runs_dir = service_of(request).config.runs_dir
    runs = _report_runs(runs_dir) if runs_dir is not None and runs_dir.is_dir() else []
    return TEMPLATES.TemplateResponse(request, "report.html", {"runs_dir": runs_dir, "runs": runs})


@router.get("/report/files/{path:path}")
def report_file(request: Request, path: str) -> FileResponse:
    """A PNG plot of a report (only files inside `--runs-dir`)."""
    runs_dir = service_of(request).config.runs_dir
    if runs_dir is None:
        raise GraphError("No report folder: start serve-memory with --runs-dir DIR.")
    target = (runs_dir / path).resolve()
    if runs_dir.resolve() not in target.parents or target.suffix != ".png" or not target.is_file():
        raise GraphError(f"Report file {path!r} is not in store {runs_dir} (only .png plots are served).")
    return FileResponse(target)
