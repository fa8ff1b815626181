"""The web page: graph list, search with channel scores, entry pages, the walk viewer and the eval report.

Server-rendered Jinja2 templates; the walk viewer alone uses a little JavaScript (static/walk.js)
to step through a walk: a live one from /v1/retrieve, or an eval record's, given inline in the page.
Walks name entries by id, so the page hands the script their labels (`walk_view`): inline for an
eval record, from /walk/labels for a live walk. Report tables are rendered by `report_markdown`.

Access (`auth`): a page of one graph needs read on it, the graph lists show only readable graphs, and the
eval report and recorded walks (runs over many conversations) need read on every graph (`read:*`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates

from memora_rl.errors import GraphError
from memora_rl.serve.api import entry_detail, search_graph, service_of
from memora_rl.serve.auth import readable, require
from memora_rl.serve.eval_runs import EvalRunError, find_record, report_runs
from memora_rl.serve.report_markdown import report_html
from memora_rl.serve.walk_view import (
    EntryLabel,
    empty_frontier_note,
    entry_labels,
    policy_reads_frontier,
    recorded_walk_labels,
)

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
TEMPLATES.env.filters["report_html"] = report_html

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    """Every served graph the caller may read, with its counts and a search box."""
    service = service_of(request)
    graphs = [service.graphs.summary(graph_id) for graph_id in readable(request, service.graphs.graph_ids())]
    return TEMPLATES.TemplateResponse(request, "index.html", {"graphs": graphs, "policy": service.policy.name})


@router.get("/graphs/{graph}", response_class=HTMLResponse)
def graph_page(request: Request, graph: str, q: Annotated[str, Query()] = "", k: int = 10) -> HTMLResponse:
    """Search one graph: fused results with their channel scores."""
    require(request, "read", graph)
    service = service_of(request)
    summary = service.graphs.summary(graph)
    results = search_graph(service, graph, q, max(1, min(k, 100))) if q.strip() else []
    return TEMPLATES.TemplateResponse(request, "graph.html", {"graph": summary, "q": q, "results": results})


@router.get("/graphs/{graph}/entries/{entry_id}", response_class=HTMLResponse)
def entry_page(request: Request, graph: str, entry_id: str) -> HTMLResponse:
    """One entry: abstraction, value, merge history, anchors, linked entries, episode text."""
    require(request, "read", graph)
    detail = entry_detail(service_of(request), graph, entry_id)
    return TEMPLATES.TemplateResponse(request, "entry.html", {"graph": graph, "detail": detail})


@router.get("/walk", response_class=HTMLResponse)
def walk_page(request: Request, graph: str = "", question: str = "", run: str = "", task: str = "") -> HTMLResponse:
    """The walk viewer: a live retrieve, or with `run` and `task` an eval record's walk (drawn by static/walk.js).

    `run` is an eval run folder relative to `--runs-dir` (as the report page names it), `task` a task id in it.
    """
    service = service_of(request)
    policy = service.policy
    context = {"graphs": readable(request, service.graphs.graph_ids()), "graph": graph, "question": question,
               "policy": policy.name, "record": None, "run": run, "labels_note": "",
               "frontier_note": empty_frontier_note(policy.name, policy.reads_frontier)}  # fmt: skip
    if run or task:
        if not (run and task):
            raise EvalRunError(400, "An eval walk needs both run (a folder under --runs-dir) and task (its task id).")
        require(request, "read", "*")
        record = find_record(service.config.runs_dir, run, task)
        labels, labels_note = recorded_walk_labels(service.graphs, record.conversation_id, record.walk or [])
        walk_data = {"walk": [step.model_dump(mode="json") for step in record.walk or []],
                     "entries": [label.model_dump() for label in labels],
                     "graph": record.conversation_id if labels else ""}  # fmt: skip
        reads = policy_reads_frontier(record.policy)
        context |= {"record": record, "labels_note": labels_note, "walk_data": walk_data,
                    "frontier_note": empty_frontier_note(record.policy, reads)}  # fmt: skip
    return TEMPLATES.TemplateResponse(request, "walk.html", context)


@router.get("/walk/labels")
def walk_labels(request: Request, graph: str, ids: Annotated[list[str], Query(alias="id")]) -> list[EntryLabel]:
    """Abstraction and value of the entries a live walk names (`id` repeated; `walk_view.MAX_LABEL_IDS` read at most).

    A live retrieve answers with the final working set's entries only; the viewer asks here for the
    labels of the frontier and of earlier steps' entries. Ids no longer stored are left out.
    """
    require(request, "read", graph)
    return entry_labels(service_of(request).graphs, graph, ids)


@router.get("/report", response_class=HTMLResponse)
def report_page(request: Request) -> HTMLResponse:
    """Eval reports found under `--runs-dir`: each run's table (eval compare or results), plots and records."""
    require(request, "read", "*")
    runs_dir = service_of(request).config.runs_dir
    runs = report_runs(runs_dir) if runs_dir is not None and runs_dir.is_dir() else []
    return TEMPLATES.TemplateResponse(request, "report.html", {"runs_dir": runs_dir, "runs": runs})


@router.get("/report/files/{path:path}")
def report_file(request: Request, path: str) -> FileResponse:
    """A PNG plot of a report (only files inside `--runs-dir`)."""
    require(request, "read", "*")
    runs_dir = service_of(request).config.runs_dir
    if runs_dir is None:
        raise GraphError("No report folder: start serve-memory with --runs-dir DIR.")
    target = (runs_dir / path).resolve()
    if runs_dir.resolve() not in target.parents or target.suffix != ".png" or not target.is_file():
        raise GraphError(f"Report file {path!r} is not in store {runs_dir} (only .png plots are served).")
    return FileResponse(target)
