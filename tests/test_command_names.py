"""Every `memora-rl ...` command that the package's strings and the README name exists.

Guards the hints users follow: an error that says "run `memora-rl builders build`" when the command is
`memora-rl graph build` sends them to a dead end (issue 52). The test collects each `memora-rl <words>`
in the str constants and f-strings of `memora_rl/**/*.py` and in README.md (prose and code fences), and
resolves the leading sub-command words against the typer app: options (`--x`), placeholders (`<run>`,
`ENV`, `...`, an f-string field) and punctuation end the path; `a|b` and `a/b` name alternatives; a word
that is not a sub-command of a group is an error, unless the group has no sub-commands; after a plain
command the rest are its arguments. Outside code (backticks, fences) a few phrases use the project's name
as a noun ("the memora-rl harmonic memory graph"); `PROSE_USES` lists them.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "memora_rl"
README = REPO / "README.md"

MENTION = re.compile(r"(?<![\w.-])memora-rl(?=[ \t])")
"""`memora-rl` followed by a space: not `memora-rl-export/1`, `memora_rl` or `memora-rl:`."""
WORD = re.compile(r"[a-z][a-z0-9-]*(?:[|/][a-z][a-z0-9-]*)*")
"""A command word, or alternatives `a|b` / `a/b`; anything else (`--x`, `<run>`, `ENV`, `...`) ends the path."""
CLOSERS = "`).,;:'\"*"
"""Punctuation that may follow the last command word of a mention (it ends the path there)."""
FIELD = "{…}"
"""Stands for an f-string's replacement field; it is not a command word, so it ends the path."""
PROSE_USES: frozenset[tuple[str, ...]] = frozenset(
    {
        ("checkout",),  # "the memora-rl checkout that exported it"
        ("commit",),  # "from memora-rl commit `abc`"
        ("envs",),  # table title "memora-rl envs"
        ("errors",),  # "memora-rl errors propagate"
        ("eval", "needs"),  # "memora-rl eval needs --env and --policy"
        ("graph", "store"),  # "a memora-rl graph store"
        ("harmonic",),  # "the memora-rl harmonic memory graph"
        ("keeps",),  # "where memora-rl keeps downloaded models"
        ("memory",),  # "memora-rl memory service"
        ("raises",),  # "every error memora-rl raises"
        ("reads",),  # "this memora-rl reads version 3"
        ("retrieval",),  # "memora-rl retrieval policy"
        ("trains",),  # "memora-rl trains memory-retrieval policies"
        ("version",),  # "the memora-rl version that wrote it"
    }
)
"""Word sequences after `memora-rl` that, outside code, use the project's name as a noun, not a command."""


@dataclass(frozen=True)
class Mention:
    """One `memora-rl <words>` found in a source.

    Attributes:
        where: `path:line` of the mention.
        text: the mention as written, up to the end of its line.
        words: the leading command words, each a tuple of alternatives (`graph export/import`).
        in_code: whether it sits in a code span or fence (prose uses of the name are not allowed there).
    """

    where: str
    text: str
    words: tuple[tuple[str, ...], ...]
    in_code: bool


def command_words(rest: str) -> tuple[tuple[str, ...], ...]:
    """The command words at the start of `rest` (the text after `memora-rl`), up to the end of its line.

    Args:
        rest: what follows `memora-rl` in the source text.

    Returns:
        One tuple of alternatives per word, e.g. `(("graph",), ("export", "import"))` for `graph export/import`.
    """
    words: list[tuple[str, ...]] = []
    for token in rest.split("\n", 1)[0].split():
        core = token.split("`", 1)[0].rstrip(CLOSERS)  # "serve`'s": a code span closes inside the token
        if not WORD.fullmatch(core):
            break
        words.append(tuple(re.split(r"[|/]", core)))
        if core != token:
            break
    return tuple(words)


def mentions_in(
    text: str, where: str, first_line: int, *, code: bool, last_line: int | None = None
) -> Iterator[Mention]:
    """Each `memora-rl` mention in `text`.

    Args:
        text: a string literal's value or a README block.
        where: the file, as shown in failures.
        first_line: the file's line number of the text's first line.
        code: whether the whole text is code (a fenced block).
        last_line: the last line the text spans in the file, to clamp line numbers of escaped newlines.

    Yields:
        Every mention, with its line and whether it is inside code (the fence, or an odd number of backticks before).
    """
    for match in MENTION.finditer(text):
        before = text[: match.start()]
        line = first_line + before.count("\n")
        if last_line is not None:
            line = min(line, last_line)
        rest = text[match.end() :]
        yield Mention(
            where=f"{where}:{line}",
            text="memora-rl" + rest.split("\n", 1)[0].rstrip(),
            words=command_words(rest),
            in_code=code or before.count("`") % 2 == 1,
        )


def python_mentions(path: Path) -> Iterator[Mention]:
    """Mentions in the str constants and f-strings (constant parts; fields end a path) of one Python file.

    Args:
        path: a Python source file.

    Yields:
        Every mention in its string literals, docstrings included.
    """
    where = path.relative_to(REPO).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else FIELD
                for part in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_fstrings:
            text = node.value
        else:
            continue
        yield from mentions_in(text, where, node.lineno, code=False, last_line=node.end_lineno)


def markdown_mentions(text: str, where: str) -> Iterator[Mention]:
    """Mentions in Markdown: fenced blocks are code, prose goes paragraph by paragraph.

    Args:
        text: the Markdown source.
        where: the file, as shown in failures.

    Yields:
        Every mention; in prose, inline code spans may wrap lines within their paragraph.
    """
    block: list[str] = []
    block_start = 1
    in_fence = False

    def flush() -> Iterator[Mention]:
        yield from mentions_in("\n".join(block), where, block_start, code=in_fence)
        block.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            yield from flush()
            in_fence = not in_fence
            block_start = number + 1
        elif not in_fence and not line.strip():
            yield from flush()
            block_start = number + 1
        else:
            block.append(line)
    yield from flush()


def all_mentions() -> list[Mention]:
    """Every mention in `memora_rl/**/*.py` and README.md."""
    mentions = [mention for path in sorted(PACKAGE.rglob("*.py")) for mention in python_mentions(path)]
    return [*mentions, *markdown_mentions(README.read_text(encoding="utf-8"), README.name)]


def sub_commands(command: object) -> list[str] | None:
    """The sub-command names of a group, or None for a plain command.

    Typer builds its commands on its own copy of click (`typer._click`), so groups are recognised by
    their `commands` mapping rather than by class.

    Args:
        command: a command of `typer.main.get_command(app)`'s tree.

    Returns:
        The names its `commands` mapping holds (empty for a group without sub-commands), or None.
    """
    commands = getattr(command, "commands", None)
    return None if commands is None else list(commands)


def find_sub_command(group: object, name: str) -> object | None:
    """The sub-command `name` of `group` as click resolves it (`get_command` with a fresh context), or None."""
    context = group.context_class(group)  # type: ignore[attr-defined]
    return group.get_command(context, name)  # type: ignore[attr-defined]


def path_problem(root: object, words: Sequence[str]) -> str | None:
    """Why `memora-rl <words>` is not a command path of `root`, or None when it is.

    Args:
        root: the CLI's click command (`typer.main.get_command(app)`).
        words: the leading command words of one path (one alternative each).

    Returns:
        None when each word is a sub-command of the group before it, or follows a plain command (an
        argument) or a group without sub-commands; else what is missing and what the group offers.
    """
    command = root
    for depth, word in enumerate(words):
        names = sub_commands(command)
        if not names:
            return None  # a plain command (or a group without sub-commands): the rest are its arguments
        found = find_sub_command(command, word)
        if found is None:
            parent = " ".join(["memora-rl", *words[:depth]])
            return f"no command `{word}` under `{parent}` (it has: {', '.join(sorted(names))})"
        command = found
    return None


def mention_problems(root: object, mention: Mention) -> list[str]:
    """Problems of one mention: one per alternative path that does not exist.

    Args:
        root: the CLI's click command.
        mention: a collected mention.

    Returns:
        An empty list when every path it names exists (or it is a listed prose use of the name outside code).
    """
    first = tuple(options[0] for options in mention.words)
    if not mention.in_code and any(first[: len(use)] == use for use in PROSE_USES):
        return []
    problems = (path_problem(root, path) for path in itertools.product(*mention.words))
    return sorted({problem for problem in problems if problem is not None})


def text_problems(root: object, text: str, *, code: bool = False) -> list[str]:
    """Problems of every mention in a bare text (the matcher's unit tests).

    Args:
        root: the CLI's click command.
        text: a string as it would appear in a literal or README paragraph.
        code: whether the text is a fenced code block.

    Returns:
        The problems found, in order.
    """
    return [
        problem for mention in mentions_in(text, "<text>", 1, code=code) for problem in mention_problems(root, mention)
    ]


@pytest.fixture(scope="module")
def root() -> object:
    """The `memora-rl` click command, sub-commands registered (no model is loaded)."""
    from memora_rl.cli import app

    return typer.main.get_command(app)


def test_every_named_command_exists(root: object) -> None:
    """Each `memora-rl ...` in the package's strings and the README resolves in the typer app."""
    mentions = all_mentions()
    assert len(mentions) > 30, f"only {len(mentions)} `memora-rl` mentions found: the collector is broken"
    assert any(m.words[:2] == (("graph",), ("build",)) for m in mentions), "`memora-rl graph build` was not collected"
    bad = [
        f"{mention.where}: `{mention.text}`: {problem}"
        for mention in mentions
        for problem in mention_problems(root, mention)
    ]
    assert not bad, "Commands named in messages, docs or README that do not exist:\n" + "\n".join(bad)


def test_matcher_rejects_made_up_commands_and_accepts_real_ones(root: object) -> None:
    """`memora-rl builders build` is an error naming the missing word; `memora-rl graph build` and kin pass."""
    [problem] = text_problems(root, "build it first (memora-rl builders build).")
    assert problem.startswith("no command `builders` under `memora-rl` (it has: ")
    [problem] = text_problems(root, "`memora-rl graph bild --out x`")
    assert problem.startswith("no command `bild` under `memora-rl graph` (it has: ")
    assert text_problems(root, "start one with `memora-rl llm serve`") != []  # `serve` is top level
    assert text_problems(root, "memora-rl graph build|bild") != []  # each alternative is checked
    assert text_problems(root, "(`memora-rl llm`'s default)") != []  # a span closing inside the token
    for real in (
        "build it first: `memora-rl graph build --data DATA --out graphs/x.sqlite`.",
        "(memora-rl graph build, or evaluate through the env that builds it)",
        "memora-rl graph build|stats|show|search|export|import",
        "memora-rl graph export/import",
        "memora-rl eval compare runs/eval/A runs/eval/B",
        "`memora-rl eval` output folder",
        "one with `--no-enable-lora` (`memora-rl serve`'s default)",
        "memora-rl eval --env E --policy P",
        "memora-rl env stats synthetic-hard --split test",  # a plain command: the rest are arguments
        "memora-rl serve-memory --store graphs/synthetic.sqlite",
        "`memora-rl serve --model {…}`",
        "memora-rl export --run <run> --force",
        "memora-rl-export/1 is a format, memora_rl a package, memora-rl: a title",
        "the memora-rl harmonic memory graph; a memora-rl graph store",  # prose uses of the name
    ):
        assert text_problems(root, real) == [], real
    assert text_problems(root, "`memora-rl harmonic`") != []  # inside code, no prose allowance
    assert text_problems(root, "memora-rl graph store", code=True) != []


def test_groups_without_sub_commands_and_registered_groups_take_what_follows() -> None:
    """A bare group takes arguments; a registered group (e.g. `experiment`) accepts its own sub-commands only."""
    app = typer.Typer()
    app.callback()(lambda: None)
    app.add_typer(typer.Typer(), name="bare")
    experiment = typer.Typer()
    for name in ("learning", "refine-headroom", "exploration"):
        experiment.command(name)(lambda: None)
    app.add_typer(experiment, name="experiment")
    root = typer.main.get_command(app)
    assert path_problem(root, ["bare", "anything"]) is None
    assert path_problem(root, ["experiment", "refine-headroom"]) is None
    assert "it has: exploration, learning, refine-headroom" in (path_problem(root, ["experiment", "refine"]) or "")
    assert path_problem(root, ["experiments", "learning"]) is not None


def test_markdown_fences_and_wrapped_code_spans_are_code() -> None:
    """Fenced blocks and inline spans that wrap a line count as code; plain prose does not."""
    text = (
        "The memora-rl harmonic graph (`memora-rl export --run R --out\nexports/x`).\n\n"
        "```bash\nmemora-rl trains a policy\n```\n"
    )
    found = [(m.where, m.in_code, m.words[:1]) for m in markdown_mentions(text, "X.md")]
    assert found == [
        ("X.md:1", False, (("harmonic",),)),
        ("X.md:1", True, (("export",),)),
        ("X.md:5", True, (("trains",),)),
    ]
