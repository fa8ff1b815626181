"""pyproject.toml lists every package of memora_rl and installs `envs/` under its project-specific name."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def setuptools_config() -> dict:
    """The `[tool.setuptools]` table of the project's pyproject.toml."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_memora_rl_package_is_listed() -> None:
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "memora_rl").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    listed = set(setuptools_config()["packages"])
    assert on_disk - listed == set()  # a package missing here would be left out of the wheel
    assert listed - on_disk == {"memora_rl_envs"}


def test_envs_folder_installs_as_memora_rl_envs() -> None:
    config = setuptools_config()
    assert config["package-dir"] == {"memora_rl_envs": "envs"}
    assert "envs" not in config["packages"]
    assert (REPO / "envs" / "__init__.py").is_file()
