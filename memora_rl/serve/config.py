"""Typed settings of `memora-rl serve-memory`: stores, policy, builder and limits, every default in one place."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from memora_rl.config import StrictModel
from memora_rl.errors import ConfigError

PolicyName = Literal["semantic", "heuristic", "llm"]
"""`semantic` stops after the first search; `heuristic` expands the best frontier ids; `llm` asks a served model."""


class ServeConfig(StrictModel):
    """What one memory-service process serves."""

    stores: list[str] = Field(min_length=1)
    """Graph stores: SQLite files or `postgresql://user@host:port/db` URLs (PostgreSQL + pgvector, which several
    serve-memory replicas may share); every graph they hold is served under its graph id (ids must not collide).
    A missing store is created empty (ingest then creates graphs in the first store). Clients see a store by
    name only (a file name, `postgresql:<database>[.<schema>]`), never its folder, host or password."""
    policy: PolicyName = "semantic"
    """The retrieval policy every `/v1/retrieve` walks the graph with."""
    llm_base_url: str | None = None
    """OpenAI-compatible endpoint ending in `/v1` serving the exported policy (policy=llm only)."""
    llm_model: str | None = None
    """Served model (or LoRA adapter) name of the exported policy (policy=llm only)."""
    constrained: bool = True
    """policy=llm: decode each action under the JSON schema of the actions valid in the walk's state (vLLM
    structured outputs: frontier ids, the env's id limit and budget, a bounded query, stop), so no action of the
    served policy is invalid, whatever conversations it walks. Off: the model's free text, as in training."""
    export: Path | None = None
    """The export being served (policy=llm only): walks take its training env's settings (observation layout,
    few-shot turns, action costs, judge, and a learned frontier ranker, fit on its training env's data), so the
    policy sees what it was trained on; budget and top-k stay the service's. None: the default env settings."""
    builder: str = "extractive"
    """Builder that `/v1/ingest` uses (registry name: extractive, memora, nemori)."""
    builder_config: Path | None = None
    """Optional YAML config of the builder (e.g. configs/builders/extractive.yaml)."""
    builder_llm_base_url: str | None = None
    """OpenAI-compatible endpoint (`.../v1`) of the LLM builders (memora, nemori); ignored by extractive."""
    builder_llm_model: str | None = None
    """Served model name of the LLM builders; ignored by extractive."""
    budget: float = Field(default=8.0, gt=0.0)
    """Default walk budget (units: 1.0 = one expanded entry) when a request names none."""
    max_budget: float = Field(default=32.0, gt=0.0)
    """Largest budget a request may ask for (bounds the work one request can cause)."""
    top_k: int = Field(default=5, ge=1, le=50)
    """Entries placed in the working set by the first search (and by each refine)."""
    max_ingest_turns: int = Field(default=500, ge=1)
    """Most turns (records) one ingest batch may carry, `/v1/ingest` or the MCP tool `remember` (one transaction
    per batch); more is refused with 413 and nothing is written."""
    max_ingest_chars: int = Field(default=1_000_000, ge=1)
    """Most characters of turn text one ingest batch may carry, all turns together (bounds the embedding and
    builder work of one request); more is refused with 413 and nothing is written."""
    max_question_chars: int = Field(default=4000, ge=1)
    """Longest question, in characters, that `/v1/retrieve` or the MCP tool `retrieve` takes (it is embedded and
    shown to the policy at every step); longer is refused with 422."""
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1)
    """Largest HTTP request body, in bytes, on every route (`/mcp` included); a larger one is refused with 413
    before it is parsed (4 MiB holds a full batch of `max_ingest_chars` plain-text characters)."""
    request_timeout_s: float = Field(default=60.0, gt=0.0)
    """Seconds a retrieve or ingest may run before it is answered 503 (a walk checks it before each step, an
    ingest while it waits for the store's write lock and before it writes: a timed-out ingest writes nothing)."""
    runs_dir: Path | None = None
    """Folder holding eval runs and `eval compare` outputs for the report page and the record walks of `/walk`
    (None: the page says how to set it); runs are named relative to it, and nothing outside it is read."""
    host: str = "127.0.0.1"
    """Interface uvicorn binds to."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """`Host` header values answered besides loopback and a specific bind address (`memora_rl.serve.hosts`):
    `name:port`, or `name:*` for any port. Every route refuses other hosts (DNS-rebinding protection)."""
    port: int = Field(default=8700, ge=0, le=65535)
    """TCP port (0 picks a free one)."""
    workers: int = Field(default=1, ge=1, le=64)
    """uvicorn worker processes, each with its own embedder, connections and policy client; requests are spread
    over them (about one per core). Ingests stay serialised across them: by a file lock beside a SQLite store,
    by the database's write lock on PostgreSQL."""
    read_connections: int = Field(default=4, ge=1, le=32)
    """Read connections per PostgreSQL store, taken in turn by requests. A store object runs one statement at a
    time on its connection, and a PostgreSQL read is a round trip to the server, so with one connection
    concurrent retrieves would take turns; each connection keeps its own in-memory views of the graphs it
    reads (memory grows with it). A SQLite store keeps one (its reads are in-process)."""
    threads: int = Field(default=1, ge=1, le=64)
    """Threads of a query embedding (PyTorch or ONNX Runtime); 1 avoids oversubscribing cores under concurrency."""
    no_auth: bool = False
    """Serve without tokens: every caller may read and write every graph (one user on a laptop). Allowed only
    when `host` is loopback (127.0.0.1, ::1, localhost); refused at start on any other interface. Off (the
    default): every route but /healthz, the login page, /docs and static files needs a token with a scope."""
    tokens: Path | None = None
    """SQLite file of the access tokens (`memora-rl tokens create`), created when missing; None: the default,
    `$MEMORA_RL_HOME/serve/tokens.sqlite`. Read on every request, so a token created or revoked while the
    service runs takes effect at once. Unused with `no_auth`."""

    @field_validator("stores", mode="before")
    @classmethod
    def _locations(cls, stores: object) -> object:
        """Paths as text; a URL that went through `pathlib.Path` (its `//` became `/`) is refused, naming the fix."""
        if not isinstance(stores, list | tuple):
            return stores
        for store in stores:
            if isinstance(store, Path) and re.match(r"postgres(ql)?:/", str(store)):
                raise ConfigError(
                    f"stores: {store} looks like a PostgreSQL URL turned into a file path (its '//' became '/'); "
                    "pass the URL as a string, e.g. stores=['postgresql://user@host/db']."
                )
        return [str(store) if isinstance(store, Path) else store for store in stores]

    @model_validator(mode="after")
    def _llm_needs_endpoint(self) -> ServeConfig:
        """The llm policy cannot guess where the exported model is served."""
        if self.policy == "llm" and not (self.llm_base_url and self.llm_model):
            raise ConfigError(
                "policy=llm needs llm_base_url (e.g. http://127.0.0.1:8100/v1) and llm_model (the served name); "
                "serve the export with `memora-rl serve` first, or use policy=semantic|heuristic."
            )
        if self.export is not None and self.policy != "llm":
            raise ConfigError(
                f"export={self.export} is only read by policy=llm (got policy={self.policy}); "
                "drop the export or serve it with policy=llm."
            )
        if self.no_auth and not is_loopback(self.host):
            raise ConfigError(
                f"--no-auth lets anyone who reaches the port read and write every graph, so it is refused on "
                f"--host {self.host} (not a loopback interface). Keep --host 127.0.0.1 for --no-auth, or drop "
                "--no-auth and give each client a token: `memora-rl tokens create --name NAME --scope read:*`."
            )
        if self.budget > self.max_budget:
            raise ConfigError(
                f"budget={self.budget} exceeds max_budget={self.max_budget}; lower one or raise the other."
            )
        return self


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only (`localhost`, 127.0.0.0/8 or ::1).

    >>> [is_loopback(host) for host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "10.0.0.5", "memory.lan")]
    [True, True, True, False, False, False]
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve to any interface
        return False
