"""The token file and `memora-rl tokens`: no secret stored in clear, scopes, revocation; where `--no-auth` may run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memora_rl.cli import app
from memora_rl.errors import ConfigError
from memora_rl.serve.config import ServeConfig
from memora_rl.serve.tokens import TokenRejected, TokenStore, parse_scope, split_token

MEMORA_RL = str(Path(sys.executable).with_name("memora-rl"))


def stored_bytes(path: Path) -> bytes:
    """Every byte of the token file and any journal beside it."""
    return b"".join(found.read_bytes() for found in path.parent.glob(path.name + "*"))


def test_the_token_file_holds_no_secret_in_clear(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.sqlite")
    tokens = [store.create(f"agent-{n}", [parse_scope("read:*"), parse_scope("write:notes")]) for n in range(3)]
    data = stored_bytes(store.path)
    for token in tokens:
        token_id, secret = split_token(token)
        assert token_id.encode() in data  # the public id names the row
        assert secret.encode() not in data and token.encode() not in data
        assert secret[:16].encode() not in data  # not even a part of it
        assert store.verify(token).name.startswith("agent-")
    assert (store.path.stat().st_mode & 0o777) == 0o600
    forged = tokens[0][:-4] + ("aaaa" if not tokens[0].endswith("aaaa") else "bbbb")  # right id, wrong secret
    with pytest.raises(TokenRejected, match="unknown"):
        store.verify(forged)


def test_revoked_tokens_are_refused_and_names_stay_unique(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.sqlite")
    first = store.create("alice", [parse_scope("read:friends")])
    with pytest.raises(ConfigError, match=r"already named 'alice'.*tokens revoke alice"):
        store.create("alice", [parse_scope("read:*")])
    assert store.revoke("alice") and not store.revoke("alice")
    with pytest.raises(TokenRejected, match="'alice' was revoked"):
        store.verify(first)
    second = store.create("alice", [parse_scope("write:*")])  # a revoked name may be given a new token
    assert store.verify(second).may("write", "anything")
    with pytest.raises(TokenRejected, match="unknown"):
        store.verify(first)
    with pytest.raises(ConfigError, match=r"no token is named 'bob'.*alice"):
        store.revoke("bob")


@pytest.mark.parametrize("text", ["admin:*", "read", "read:", "write:bad id!", "read:friends,team"])
def test_a_bad_scope_names_itself_and_the_fix(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--scope .* is not a scope; write read:GRAPH"):
        parse_scope(text)


def test_tokens_cli_creates_lists_and_revokes(tmp_path: Path) -> None:
    file = str(tmp_path / "tokens.sqlite")
    runner = CliRunner()
    created = runner.invoke(app, ["tokens", "create", "--name", "alice", "--scope", "read:*", "--scope",
                                  "write:graphA", "--tokens", file])  # fmt: skip
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("mrl_") and "\n" not in token  # the token alone on stdout, for $(...)
    assert "shown only now" in created.stderr and token not in created.stderr
    assert TokenStore(Path(file)).verify(token).scope_text() == "read:* write:graphA"
    listed = runner.invoke(app, ["tokens", "list", "--tokens", file])
    assert listed.exit_code == 0 and "alice" in listed.stdout and "read:* write:graphA" in listed.stdout
    assert split_token(token)[1] not in listed.stdout
    revoked = runner.invoke(app, ["tokens", "revoke", "alice", "--tokens", file])
    assert revoked.exit_code == 0 and "Revoked token 'alice'" in revoked.stdout
    revoked_at = runner.invoke(app, ["tokens", "list", "--tokens", file]).stdout.splitlines()[1].split()[-1]
    assert revoked_at != "-" and revoked_at[:4].isdigit()  # the list shows when it was revoked
    bad = runner.invoke(app, ["tokens", "create", "--name", "bob", "--scope", "delete:*", "--tokens", file])
    assert bad.exit_code != 0 and isinstance(bad.exception, ConfigError)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "memory.lan"])
def test_no_auth_is_refused_off_loopback(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError, match=f"refused on --host {host} .*--host 127.0.0.1.*memora-rl tokens create"):
        ServeConfig(stores=[tmp_path / "s.sqlite"], no_auth=True, host=host)
    for loopback in ("127.0.0.1", "localhost", "::1"):
        assert ServeConfig(stores=[tmp_path / "s.sqlite"], no_auth=True, host=loopback).no_auth


def test_serve_memory_no_auth_on_all_interfaces_is_refused_at_start(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    command = [MEMORA_RL, "serve-memory", "--store", str(store), "--no-auth", "--host", "0.0.0.0", "--port", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, output
    assert "--no-auth" in output and "--host 0.0.0.0" in output and "--host 127.0.0.1" in output, output
    assert not store.exists()  # refused before any store is opened
