"""Every module of memora_rl stays at most `MAX_LINES` lines: a longer one holds more than one thing, so split it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "memora_rl"
MAX_LINES = 400


def line_count(path: Path) -> int:
    """Lines of a text file (a last line without a newline counts too)."""
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(root: Path, max_lines: int = MAX_LINES) -> dict[str, int]:
    """`.py` files under `root` longer than `max_lines`, by path relative to `root`'s parent, with their lengths."""
    counts = {str(path.relative_to(root.parent)): line_count(path) for path in sorted(root.rglob("*.py"))}
    return {path: lines for path, lines in counts.items() if lines > max_lines}


def test_every_module_is_at_most_400_lines() -> None:
    offenders = oversized(ROOT)
    longest_first = sorted(offenders.items(), key=lambda item: -item[1])
    listed = "\n".join(f"  {path}: {lines} lines" for path, lines in longest_first)
    assert not offenders, f"modules over {MAX_LINES} lines (split each along a seam):\n{listed}"


def test_an_oversized_module_is_named_with_its_length(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "small.py").write_text("x = 1\n" * 400)
    (package / "sub" / "big.py").write_text("x = 1\n" * 401)
    assert oversized(package) == {str(Path("pkg") / "sub" / "big.py"): 401}
