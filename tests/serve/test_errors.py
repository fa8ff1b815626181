"""Each error the service raises maps to its HTTP status and a body that says what to do."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memora_rl.errors import GraphError
from memora_rl.serve.errors import install_error_handlers
from memora_rl.serve.graphs import UnknownGraphError
from memora_rl.serve.ingest import IngestConflictError
from memora_rl.serve.limits import Deadline, over_limit


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (IngestConflictError("graph 'g': another writer added session 3; send the batch again."), 409),
        (UnknownGraphError("graph 'nope' is not served"), 404),
        (GraphError("Entry 'e9' is not in graph 'g'"), 404),
        (GraphError("batch() is already open on this thread; batches do not nest."), 400),
        (over_limit("turns", "4 turns in one batch", 3, "max_ingest_turns", 413, "fewer turns"), 413),
        (over_limit("question", "9 characters", 8, "max_question_chars", 422, "a shorter question"), 422),
        (Deadline.start(0.0).expired("walking"), 503),
    ],
)
def test_errors_map_to_their_status_with_the_message(error: Exception, status: int) -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fail")
    def fail() -> None:
        raise error

    response = TestClient(app).get("/fail")
    assert response.status_code == status
    assert response.json()["error"] == str(error)
