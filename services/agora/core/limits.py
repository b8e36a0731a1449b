"""Bounds on every string and list that crosses a boundary, declared once.

Every contract model uses these types, so HTTP bodies, topic payloads, actor arguments and the
CLI's local validation refuse the same oversized input with the same typed error. Checks are
linear in the input's size (pydantic checks a length before it looks at the items of a list
that is too long only as far as it must). Free-form JSON values (validation results, saved
partial results) are bounded by the request body limit as a whole.

| bound | value | where |
|---|---:|---|
| `MAX_BODY_BYTES` | 1 MiB | any HTTP request body of the public APIs (413 `PAYLOAD_TOO_LARGE`) |
| `MAX_ID_CHARS` | 256 | task, agent, escalation, session and bid ids |
| `MAX_NAME_CHARS` | 256 | agent names, persons' and services' identities (`who`), tool names |
| `MAX_SKILL_TAG_CHARS` | 64 | one skill tag |
| `MAX_SKILL_TAGS` | 64 | skill tags of one agent profile |
| `MAX_TASK_SKILLS` | 32 | required skills, and preferred skills, of one task or query |
| `MAX_TEXT_CHARS` | 16,384 | descriptions, prompts, step texts, outputs, summaries |
| `MAX_NOTE_CHARS` | 2,048 | reasons, rationales, guidance, `why` |
| `MAX_ITEMS` | 100 | other lists: error histories, validation results, triggers, suggestions |
| `MAX_CANDIDATES` | 1,000 | agents one capability filter answers: bids, scores, awards of a task |
| `MAX_PAGE_SIZE` | 500 | one page of a listing |
| `MAX_JSON_DEPTH` | 64 | nesting of a refused payload kept as JSON in its dead letter (deeper: as its text) |
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

MAX_BODY_BYTES = 1024 * 1024
MAX_ID_CHARS = 256
MAX_NAME_CHARS = 256
MAX_SKILL_TAG_CHARS = 64
MAX_SKILL_TAGS = 64
MAX_TASK_SKILLS = 32
MAX_TEXT_CHARS = 16_384
MAX_NOTE_CHARS = 2_048
MAX_ITEMS = 100
MAX_CANDIDATES = 1000
MAX_PAGE_SIZE = 500
MAX_JSON_DEPTH = 64


def json_depth(value: object) -> int:
    """How deeply `value` (parsed JSON) nests lists and objects; iterative, linear in its size."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = list(item)
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


ID_PATTERN = r"^[^\s|\x00-\x1f\x7f]+$"
"""Ids are used in state keys and URLs: no whitespace and no `|` (Dapr's key separator)."""

Identifier = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
"""An id chosen by a client (task, agent, escalation, session)."""
IdRef = Annotated[str, Field(max_length=MAX_ID_CHARS)]
"""An id quoted in a record, an answer or an event (an escalation's, a session's, a step's): it
was checked where it was chosen, so only its length is bounded here."""
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
NameRef = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
"""A name or identity (`who`) quoted in a record or an answer."""
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Note = Annotated[str, Field(max_length=MAX_NOTE_CHARS)]
SkillTag = Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_SKILL_TAG_CHARS)]
"""One skill tag, stripped before its length is checked (`clean_skill_tags` then refuses blank
ones and drops repeats)."""
Traceparent = Annotated[str, Field(max_length=MAX_ID_CHARS)]
"""A W3C traceparent as the tracing layer writes it (55 characters in version 00)."""


def clean_skill_tags(tags: list[str]) -> list[str]:
    """Strip tags, refuse blank or overlong ones, drop repeats keeping the caller's order.

    Linear in the number of tags (a dict keeps first occurrences in order)."""
    cleaned: dict[str, None] = {}
    for tag in tags:
        stripped = tag.strip()
        if not stripped:
            raise ValueError("skill tags must be non-empty strings")
        if len(stripped) > MAX_SKILL_TAG_CHARS:
            raise ValueError(f"a skill tag has at most {MAX_SKILL_TAG_CHARS} characters")
        cleaned[stripped] = None
    return list(cleaned)


def one_line(text: str, limit: int) -> str:
    """`text` on one line (each run of whitespace one space), cut to at most `limit` characters
    with an ellipsis (for listings and trees people read in a terminal)."""
    flat = " ".join(text.split())
    limit = max(limit, 20)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
