"""Access tokens of serve-memory: who may read or write which graphs, kept hashed in a small SQLite file.

A token reads `mrl_<id>_<secret>`: `id` (12 hex digits) names its row and is not secret; `secret` is 32
random bytes (URL-safe base64). The file keeps the id, a random 16-byte salt and `sha256(salt + secret)`,
never the secret, so a copy of the file lets no one in; a presented token is checked by recomputing the
digest and comparing it in constant time (`hmac.compare_digest`).

Scopes are `read:GRAPH`, `write:GRAPH`, `read:*` or `write:*` (`*`: every graph, new ones included);
`write` on a graph implies `read` on it (an agent that remembers can recall what it wrote).

The file is created on first use (mode 0600, `memora-rl tokens create` or a service start); each write is one
SQLite transaction, so a crash leaves the file as it was before or after. The service reads it on every
request: a token created or revoked while it runs takes effect at once, in every worker process.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from memora_rl.errors import ConfigError, MemoraError
from memora_rl.serve.schemas import GRAPH_ID_PATTERN

Action = Literal["read", "write"]
"""What a scope allows: `read` (retrieve, search, graph reads) or `write` (ingest; implies read)."""
ALL_GRAPHS = "*"
"""The graph part of a scope on every graph (no graph id can be `*`)."""
TOKEN_PREFIX = "mrl"
"""First part of every token, so one pasted in the wrong place is recognisable (and greppable in leaks)."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"
"""A token's name: who or what holds it (`alice`, `agent-7`, `ci@build`); logged when it is refused."""
SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    name TEXT PRIMARY KEY,
    token_id TEXT NOT NULL UNIQUE,
    salt BLOB NOT NULL,
    digest BLOB NOT NULL,
    scopes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
)
"""
"""One row per token: `scopes` space-separated, times ISO 8601 UTC, `revoked_at` NULL while it is valid."""


@dataclass(frozen=True)
class Scope:
    """One permission: `action` on `graph` (a graph id, or `*` for every graph)."""

    action: Action
    graph: str

    def __str__(self) -> str:
        return f"{self.action}:{self.graph}"


def parse_scope(text: str) -> Scope:
    """A scope from its `ACTION:GRAPH` spelling.

    >>> parse_scope("write:graphA"), str(parse_scope("read:*"))
    (Scope(action='write', graph='graphA'), 'read:*')

    Raises:
        ConfigError: the action is not read or write, or the graph is neither `*` nor a valid graph id.
    """
    action, _, graph = text.strip().partition(":")
    if action not in ("read", "write") or not (graph == ALL_GRAPHS or re.match(GRAPH_ID_PATTERN, graph)):
        raise ConfigError(
            f"--scope {text!r} is not a scope; write read:GRAPH or write:GRAPH (a graph id, letters, digits and "
            "_ . : -), or read:* / write:* for every graph, e.g. --scope read:* --scope write:notes."
        )
    return Scope(action=action, graph=graph)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a token's name and scopes.

    Attributes:
        name: the token's name (logged with every refusal; never the secret).
        scopes: what it may do.
    """

    name: str
    scopes: tuple[Scope, ...]

    def may(self, action: Action, graph: str) -> bool:
        """Whether `action` on `graph` is allowed (`graph="*"`: on every graph); write implies read.

        >>> alice = Principal("alice", (parse_scope("read:*"), parse_scope("write:notes")))
        >>> alice.may("read", "team"), alice.may("write", "notes"), alice.may("write", "team")
        (True, True, False)
        >>> Principal("bot", (parse_scope("write:notes"),)).may("read", "notes")
        True
        """
        return any(
            scope.graph in (ALL_GRAPHS, graph) and (scope.action == action or scope.action == "write")
            for scope in self.scopes
        )

    def scope_text(self) -> str:
        """The scopes as written at creation, space-separated (`none` for none)."""
        return " ".join(map(str, self.scopes)) or "none"


EVERYONE = Principal(name="anyone (--no-auth)", scopes=(Scope("write", ALL_GRAPHS),))
"""The principal of every request to a service started with `--no-auth`, and of MCP over stdio."""


@dataclass(frozen=True)
class TokenInfo:
    """A stored token as `memora-rl tokens list` shows it (no secret, no digest)."""

    name: str
    token_id: str
    scopes: str
    created_at: str
    revoked_at: str | None


class TokenRejected(MemoraError):
    """A presented token is malformed, unknown or revoked (HTTP 401).

    Args:
        reason: why, in words safe to answer (never the token).
        name: the token's name when its row was found (a revoked token), else None.
    """

    def __init__(self, reason: str, name: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.name = name


def digest_of(salt: bytes, secret: str) -> bytes:
    """The stored digest of a secret: `sha256(salt + secret)` (the secret is 256 random bits: no stretching needed)."""
    return hashlib.sha256(salt + secret.encode()).digest()


def split_token(token: str) -> tuple[str, str]:
    """`(token_id, secret)` of `mrl_<id>_<secret>`.

    >>> split_token("mrl_0123456789ab_s3cr_et")
    ('0123456789ab', 's3cr_et')

    Raises:
        TokenRejected: the text is not shaped like a token.
    """
    prefix, _, rest = token.strip().partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != TOKEN_PREFIX or not re.fullmatch(r"[0-9a-f]{12}", token_id) or not secret:
        raise TokenRejected("the token is not shaped like a service token (mrl_<id>_<secret>)")
    return token_id, secret


def now_text() -> str:
    """The current time, ISO 8601 UTC to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


class TokenStore:
    """The token file: create, list, revoke, verify.

    Args:
        path: the SQLite file (created with its folder, mode 0600, when missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))  # SQLite takes an empty file as new
        with self.transaction() as conn:
            conn.execute(SCHEMA)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection inside one write transaction (committed on success, rolled back on error), then closed."""
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def create(self, name: str, scopes: Sequence[Scope]) -> str:
        """Store a new token for `name` and return it (the only time its secret exists outside the caller).

        A revoked token's name may be used again (its old row is replaced: the old secret stays refused).

        Raises:
            ConfigError: the name is not valid, no scope was given, or a valid token already has this name.
        """
        if not re.match(NAME_PATTERN, name):
            raise ConfigError(
                f"--name {name!r} is not a token name; use 1-64 letters, digits and _ . @ - (e.g. alice, agent-7)."
            )
        if not scopes:
            raise ConfigError(f"token {name!r} needs at least one --scope, e.g. --scope read:* or --scope write:notes.")
        token_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_bytes(16)
        text = " ".join(dict.fromkeys(map(str, scopes)))
        with self.transaction() as conn:
            row = conn.execute("SELECT revoked_at FROM tokens WHERE name = ?", (name,)).fetchone()
            if row is not None and row[0] is None:
                raise ConfigError(
                    f"a valid token is already named {name!r} in {self.path}; pick another --name, or "
                    f"`memora-rl tokens revoke {name}` first to replace it."
                )
            conn.execute("DELETE FROM tokens WHERE name = ?", (name,))
            conn.execute(
                "INSERT INTO tokens (name, token_id, salt, digest, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (name, token_id, salt, digest_of(salt, secret), text, now_text()),
            )
        return f"{TOKEN_PREFIX}_{token_id}_{secret}"

    def tokens(self) -> list[TokenInfo]:
        """Every stored token, oldest first (revoked ones included)."""
        with closing(sqlite3.connect(self.path, timeout=30)) as conn:
            rows = conn.execute(
                "SELECT name, token_id, scopes, created_at, revoked_at FROM tokens ORDER BY created_at, name"
            ).fetchall()
        return [TokenInfo(*row) for row in rows]

    def revoke(self, name: str) -> bool:
        """Refuse `name`'s token from now on; False when it was already revoked.

        Raises:
            ConfigError: no token has this name (the message lists the names there are).
        """
        with self.transaction() as conn:
            row = conn.execute("SELECT revoked_at FROM tokens WHERE name = ?", (name,)).fetchone()
            if row is None:
                names = [found[0] for found in conn.execute("SELECT name FROM tokens ORDER BY name")]
                raise ConfigError(
                    f"no token is named {name!r} in {self.path} (there are: {', '.join(names) or 'none'}); "
                    "`memora-rl tokens list` shows them."
                )
            if row[0] is not None:
                return False
            conn.execute("UPDATE tokens SET revoked_at = ? WHERE name = ?", (now_text(), name))
        return True

    def verify(self, token: str) -> Principal:
        """The principal of a presented token.

        Raises:
            TokenRejected: the token is malformed, unknown (no row, or the secret does not match) or revoked.
        """
        token_id, secret = split_token(token)
        with closing(sqlite3.connect(self.path, timeout=30)) as conn:
            row = conn.execute(
                "SELECT name, salt, digest, scopes, revoked_at FROM tokens WHERE token_id = ?", (token_id,)
            ).fetchone()
        if row is None or not hmac.compare_digest(digest_of(row[1], secret), row[2]):
            raise TokenRejected("the token is unknown (never created here, or mistyped)")
        name, _, _, scopes, revoked_at = row
        if revoked_at is not None:
            raise TokenRejected(f"the token {name!r} was revoked at {revoked_at}", name=name)
        return Principal(name=name, scopes=tuple(parse_scope(scope) for scope in scopes.split()))

    def active_count(self) -> int:
        """How many tokens are not revoked."""
        with closing(sqlite3.connect(self.path, timeout=30)) as conn:
            return conn.execute("SELECT COUNT(*) FROM tokens WHERE revoked_at IS NULL").fetchone()[0]
