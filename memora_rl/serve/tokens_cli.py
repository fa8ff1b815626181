"""`memora-rl tokens create|list|revoke`: the access tokens that `memora-rl serve-memory` asks callers for.

`create` prints the new token alone on stdout (so `TOKEN=$(memora-rl tokens create ...)` captures it) and
what it allows on stderr; it is shown this once, the file keeps only its salted hash. The commands work on
the file a running service reads, so a created or revoked token takes effect there at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from memora_rl.serve.tokens import TokenStore

tokens_app = typer.Typer(
    help="Access tokens of serve-memory: create, list and revoke who may read or write which graphs.",
    no_args_is_help=True,
)

TokensFile = Annotated[
    Path | None,
    typer.Option(
        "--tokens",
        help="Token file (SQLite, created when missing); default $MEMORA_RL_HOME/serve/tokens.sqlite, "
        "as serve-memory's --tokens.",
    ),
]
"""The `--tokens` option of every `tokens` command."""


def open_store(path: Path | None) -> TokenStore:
    """The token file at `path`, or the default one (imported here: `memora-rl --help` stays fast)."""
    from memora_rl.paths import service_tokens_path
    from memora_rl.serve.tokens import TokenStore

    return TokenStore(path or service_tokens_path())


@tokens_app.command("create")
def create(
    name: Annotated[str, typer.Option("--name", help="Who holds it (logged with each refusal): alice, agent-7.")],
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            help="read:GRAPH or write:GRAPH, or read:* / write:* for every graph (repeatable); write implies read.",
        ),
    ],
    tokens: TokensFile = None,
) -> None:
    """Create a token; it is printed once (stdout) and only its salted hash is stored."""
    from memora_rl.serve.tokens import parse_scope

    scopes = [parse_scope(text) for text in scope]
    store = open_store(tokens)
    token = store.create(name, scopes)
    typer.echo(token)
    allowed = " ".join(dict.fromkeys(map(str, scopes)))
    typer.echo(
        f"Token {name!r} ({allowed}) stored hashed in {store.path}. It is shown only now: hand it to its holder, "
        f"who sends `Authorization: Bearer <token>` (or signs in to the page at /login).",
        err=True,
    )


@tokens_app.command("list")
def list_tokens(tokens: TokensFile = None) -> None:
    """List the tokens: name, id, scopes, when created and revoked (never a secret)."""
    store = open_store(tokens)
    found = store.tokens()
    if not found:
        typer.echo(f"No token in {store.path}; create one with `memora-rl tokens create --name NAME --scope read:*`.")
        return
    rows = [("name", "id", "scopes", "created", "revoked")]
    rows += [(t.name, t.token_id, t.scopes, t.created_at, t.revoked_at or "-") for t in found]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@tokens_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The token's name, as `memora-rl tokens list` shows it.")],
    tokens: TokensFile = None,
) -> None:
    """Revoke a token: every request with it is refused (401) from now on, by running services too."""
    store = open_store(tokens)
    if store.revoke(name):
        typer.echo(f"Revoked token {name!r} in {store.path}.")
    else:
        typer.echo(f"Token {name!r} in {store.path} was already revoked.")
