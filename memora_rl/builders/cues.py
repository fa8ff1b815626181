"""Who and what an extractive entry is about: third-party names, the abstraction's entity and aspect, anchor cues.

Pure rules (no model, no I/O) that `memora_rl.builders.extractive` applies to each statement;
the keyphrases (aspects) they combine come from `memora_rl.builders.keyphrases`.
"""

from __future__ import annotations

from collections.abc import Sequence

from memora_rl.builders.keyphrases import find_names, normalise_token, seen_names_of, words
from memora_rl.data.records import Conversation


def speaker_name_tokens(speakers: Sequence[str]) -> list[str]:
    """The speakers' full names and each of their words ("Jon Snow" -> "Jon Snow", "Jon", "Snow").

    >>> speaker_name_tokens(["Jon Snow"])
    ['Jon Snow', 'Jon', 'Snow']
    """
    tokens: list[str] = []
    for speaker in speakers:
        for token in [speaker, *speaker.split()]:
            if token not in tokens:
                tokens.append(token)
    return tokens


def third_party_names(text: str, speakers: Sequence[str], seen_names: Sequence[str] = ()) -> list[str]:
    """Names in `text` that are neither a speaker nor a prefix of a speaker's name (a nickname).

    `seen_names` (the conversation's, `conversation_names`) also count where they open a sentence.

    >>> third_party_names("Mel, Caroline and I met Jon in Paris.", ["Caroline", "Melanie"])
    ['Jon', 'Paris']
    >>> third_party_names("Jon moved to Oslo.", ["Caroline"], seen_names=["Jon"])
    ['Jon', 'Oslo']
    """
    known = [normalise_token(token) for token in speaker_name_tokens(speakers)]
    found = find_names(text, known_names=speaker_name_tokens(speakers), seen_names=seen_names)
    return [name for name in found if not any(other.startswith(normalise_token(name)) for other in known)]


def conversation_names(conversation: Conversation) -> list[str]:
    """Third-party names the conversation writes mid-sentence in any turn (so "Hugo moved ..." names Hugo).

    A name is kept when it reads back as a third-party name on its own, which drops speakers,
    nicknames, and names `find_names` cut with trailing punctuation ("Max-").
    """
    speakers = conversation.speakers
    seen = seen_names_of((turn.text for turn in conversation.turns()), speaker_name_tokens(speakers))
    return [name for name in seen if third_party_names(name, speakers, [name])]


def aspects_without(name: str, aspects: Sequence[str]) -> list[str]:
    """The aspects that do not contain `name` (a cue "Hugo + hugo adopted" would say Hugo twice)."""
    return [aspect for aspect in aspects if name.lower() not in aspect]


def subject_and_topic(speaker: str, names: Sequence[str], text: str, aspects: Sequence[str]) -> tuple[str, str]:
    """The entity and aspect of an entry's abstraction: a third party the statement opens with, else the speaker.

    "Hugo just moved to Adelaide" is about Hugo, so its abstraction is "Hugo + adelaide", which a
    search for Hugo finds; the speaker stays the entry's speaker and the entity of its anchors.

    >>> subject_and_topic("Talia", ["Hugo", "Adelaide"], "Hugo just moved to Adelaide.", ["adelaide"])
    ('Hugo', 'adelaide')
    >>> subject_and_topic("Talia", ["Hugo"], "My cousin Hugo visited.", ["cousin hugo"])
    ('Talia', 'cousin hugo')
    """
    topic = aspects[0] if aspects else "statement"
    subject = names[0] if names and words(text)[:1] == words(names[0])[:1] else None
    if subject is None:
        return speaker, topic
    other = aspects_without(subject, aspects)
    return subject, other[0] if other else topic


def anchor_texts(speaker: str, aspects: Sequence[str], names: Sequence[str], max_anchors: int) -> list[str]:
    """'<entity> + <aspect>' cues: the speaker with each aspect, and the first third-party name, if any.

    The name goes with an aspect, and as the speaker's aspect ("Caroline + sweden": the same text on
    every statement that names Sweden, so an expand walks from one to the others).

    >>> anchor_texts("Caroline", ["support group", "adoption"], ["Sweden"], 3)
    ['Caroline + support group', 'Sweden + support group', 'Caroline + sweden']
    """
    anchors = [f"{speaker} + {aspect}" for aspect in aspects]
    for name in names[:1]:
        usable = aspects_without(name, aspects)
        anchors[1:1] = [f"{name} + {aspect}" for aspect in usable[:1]] + [f"{speaker} + {name.lower()}"]
    return list(dict.fromkeys(anchors))[:max_anchors]
