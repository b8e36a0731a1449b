"""How a task's result is checked, and the verdict of the check.

A task may carry an `Acceptance`: one check of the agent's output (the outcome's `summary`) and
what follows when the check fails. The check runs on the market's side, after the agent's
report: the agent's claim (`TaskOutcome.actual_success`) and the `Verdict` are recorded side by
side, and the reputation learns from the verdict where there is one
(`agora.core.reputation.outcome_weight`).

The kinds:

* `json_schema`: the output, read as JSON, satisfies a JSON Schema (Draft 2020-12);
* `expected`: the output is an expected answer — the same text, a match of a regular
  expression, or (its last number) a number within a tolerance;
* `checker_app`: a Dapr app the publisher names answers pass or fail with its reason (how a team
  plugs in its own tests): the task board calls it by service invocation with the task and the
  outcome (`agora.core.contracts.CheckRequest`, answered by a `CheckAnswer`);
* `judge`: a model judges the output against a rubric; its verdict is an opinion with a
  confidence, and counts as much as that confidence;
* `publisher`: the publisher checks the output itself: the agent's success stands as a passed
  verdict unless the publisher disputes it within the task's dispute window (`Dispute`).

A check that cannot be carried out (a pattern that backtracks past its time, a checker app that
does not answer after `CHECKER_ATTEMPTS` tries, or answers out of its contract) gives an
UNCHECKED verdict with the reason, never a pass.

The first two are judged here (`judge_output`), by the task board as it records the outcome,
with bounded work: the output is at most `MAX_TEXT_CHARS`, a pattern at most
`MAX_PATTERN_CHARS` and matched within `REGEX_SECONDS`. A checker app is asked after the
outcome is recorded and before the task ends (`agora.core.task_lifecycle.awaiting_verdict`).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

import regex  # type: ignore[import-untyped]
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agora.core.limits import MAX_JSON_DEPTH, MAX_NOTE_CHARS, Identifier, Name, Note

__all__ = [
    "Acceptance",
    "AcceptanceCheck",
    "CheckerApp",
    "Dispute",
    "DisputeVerdict",
    "ExpectedAnswer",
    "JsonSchemaCheck",
    "JudgeCheck",
    "JudgeOpinion",
    "MatchMode",
    "OnFailedCheck",
    "PublisherCheck",
    "Verdict",
    "VerdictStatus",
    "claim_stands",
    "judge_output",
    "standing_verdict",
]

MAX_SCHEMA_BYTES = 16 * 1024
"""A check's JSON Schema, serialized: a schema is a contract, not a document."""
MAX_PATTERN_CHARS = 512
REGEX_SECONDS = 0.5
"""How long a pattern may take to match one output: a pattern that backtracks for longer gives
an UNCHECKED verdict, not a hung task board."""
MAX_DISPUTE_WINDOW_S = 30 * 86_400
DEFAULT_DISPUTE_WINDOW_S = 86_400
"""How long the publisher may dispute a finished outcome, unless the task says otherwise."""


class JsonSchemaCheck(BaseModel):
    """The output, read as JSON, satisfies `json_schema` (Draft 2020-12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["json_schema"] = "json_schema"
    json_schema: dict[str, Any]

    @field_validator("json_schema")
    @classmethod
    def _is_a_bounded_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(schema))
        if size > MAX_SCHEMA_BYTES:
            raise ValueError(f"the schema is {size} bytes; at most {MAX_SCHEMA_BYTES}")
        if _depth(schema) > MAX_JSON_DEPTH:
            raise ValueError(f"the schema nests deeper than {MAX_JSON_DEPTH} levels")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a JSON Schema: {exc.message[:300]}") from None
        return schema


class MatchMode(StrEnum):
    EXACT = "exact"
    """The output, stripped of surrounding whitespace, is the expected text."""
    REGEX = "regex"
    """The expected text is a regular expression the whole stripped output matches."""
    NUMBER = "number"
    """The output's last number is within `tolerance` of the expected number."""


class ExpectedAnswer(BaseModel):
    """The output is the expected answer (see `MatchMode` for how it is compared)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["expected"] = "expected"
    match: MatchMode = MatchMode.EXACT
    expected: str = Field(min_length=1, max_length=MAX_NOTE_CHARS)
    tolerance: float = Field(default=0.0, ge=0.0, description="How far a number may be (`number` only).")
    case_sensitive: bool = True

    @model_validator(mode="after")
    def _expected_fits_its_mode(self) -> ExpectedAnswer:
        if self.match is MatchMode.NUMBER:
            if not math.isfinite(_as_number(self.expected)):
                raise ValueError(f"expected {self.expected!r} is not a finite number")
        elif self.tolerance:
            raise ValueError("a tolerance is for numbers (match: number)")
        if self.match is MatchMode.REGEX:
            if len(self.expected) > MAX_PATTERN_CHARS:
                raise ValueError(
                    f"the pattern is {len(self.expected)} characters; at most {MAX_PATTERN_CHARS}"
                )
            try:
                regex.compile(self.expected)
            except regex.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return self


CHECKER_ATTEMPTS = 4
"""How many times the board asks a checker app before the outcome stays UNCHECKED."""
CHECKER_FIRST_RETRY_S = 2.0
"""How long the board waits before its second try of a checker app that did not answer; each
next wait is four times the one before (2 s, 8 s, 32 s)."""


def checker_backoff(first_retry_s: float = CHECKER_FIRST_RETRY_S) -> tuple[float, ...]:
    """The waits before each next try of a checker app, from the first."""
    return tuple(first_retry_s * 4**n for n in range(CHECKER_ATTEMPTS - 1))


MAX_CHECKER_TIMEOUT_S = 60.0
METHOD_PATTERN = r"^[A-Za-z0-9_\-]+(/[A-Za-z0-9_\-]+){0,7}$"
"""A route on the checker app: path segments of letters, digits, `_` and `-` (no `..`, no
query)."""


class CheckerApp(BaseModel):
    """A Dapr app the publisher names judges the output: the board calls its `method` (POST) by
    service invocation with a `CheckRequest` and takes the `CheckAnswer` it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["checker_app"] = "checker_app"
    app_id: Identifier
    method: str = Field(default="check", max_length=128, pattern=METHOD_PATTERN)
    timeout_s: float = Field(
        default=10.0, gt=0, le=MAX_CHECKER_TIMEOUT_S, description="How long one try may take."
    )


class JudgeCheck(BaseModel):
    """A model judges the output against `rubric`: the board asks its own model (the one its
    settings name) for a `JudgeOpinion`. The verdict is an opinion, kept with its confidence,
    and it weighs in the agent's record as much as that confidence (`outcome_weight`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["judge"] = "judge"
    rubric: Note = Field(min_length=1, description="What a result must be to pass.")


class JudgeOpinion(BaseModel):
    """What the judge model answers (model output: validated, and asked again once when it is
    not one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    passed: bool
    confidence: float = Field(ge=0.0, le=1.0, description="How sure the judge is, from 0 to 1.")
    reason: Note = Field(min_length=1)


class PublisherCheck(BaseModel):
    """The publisher checks the output itself: a success the agent reports stands (a passed
    verdict, counted as one) unless the publisher disputes it within the task's
    `dispute_window_s`, which must be more than 0; a dispute corrects the record once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["publisher"] = "publisher"


BoardCheck = JsonSchemaCheck | ExpectedAnswer
"""The kinds the board judges itself on the output, in the turn that records the outcome."""
AskedCheck = CheckerApp | JudgeCheck
"""The kinds the board asks someone about, after the outcome is recorded and before the task
ends: a checker app, a judge model."""

AcceptanceCheck = Annotated[
    JsonSchemaCheck | ExpectedAnswer | CheckerApp | JudgeCheck | PublisherCheck, Field(discriminator="kind")
]


class OnFailedCheck(StrEnum):
    """What follows a failed check, as the publisher chose for the task."""

    FAIL = "fail"
    """The task ends FAILED, with the check's reason."""
    NEXT_BID = "next_bid"
    """The next-best bid not tried yet gets the task, if the task's budget still covers its
    estimate on top of what the failed turns cost and the task's deadline (counted from its
    first award) has not passed; else the task ends FAILED, with the check's reason."""
    PERSON = "person"
    """A person decides, in an escalation that shows the output and the check's reason: accept
    the output all the same (`skip`: the task COMPLETED on the person's word), fail the task
    (`abort`), or hand it to another bidder (`reassign`, within the budget and deadline as for
    `next_bid`). The task stays ALLOCATED, its outcome and failed verdict recorded, until then."""


class Acceptance(BaseModel):
    """How a task's result is checked, and what follows a failed check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    check: AcceptanceCheck
    on_failure: OnFailedCheck = OnFailedCheck.FAIL
    dispute_window_s: int = Field(default=DEFAULT_DISPUTE_WINDOW_S, ge=0, le=MAX_DISPUTE_WINDOW_S)

    @model_validator(mode="after")
    def _publisher_has_a_window(self) -> Acceptance:
        if isinstance(self.check, PublisherCheck) and self.dispute_window_s == 0:
            raise ValueError("a publisher check needs a dispute window (dispute_window_s > 0)")
        return self


class VerdictStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    UNCHECKED = "unchecked"
    """The check could not run; the reason says why. Never counted as a pass."""


class Verdict(BaseModel):
    """What a check found of one outcome: who checked it, how, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: VerdictStatus
    kind: str = Field(min_length=1, max_length=32, description="The check's kind.")
    reason: Note
    checked_by: Identifier = Field(description="The app that ran the check.")
    at: datetime | None = None
    confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="A judge's confidence in its opinion (`judge` verdicts only): an opinion, not a fact.",
        exclude_if=lambda confidence: confidence is None,
    )

    @property
    def passed(self) -> bool:
        return self.status is VerdictStatus.PASSED


class DisputeVerdict(StrEnum):
    """What a dispute says the outcome was."""

    PASSED = "passed"
    FAILED = "failed"


class Dispute(BaseModel):
    """The publisher's word against a finished outcome's verdict: who, why, when, what the verdict
    was before it (None: the outcome had none, the agent's word stood) and what it is now."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    by: Name
    reason: Note = Field(min_length=1)
    at: datetime
    verdict: DisputeVerdict
    before: Verdict | None = None


def claim_stands(claimed_success: bool, verdict: Verdict | None) -> bool:
    """Whether an outcome counts as a success: as its check found where the check passed or
    failed, else (no check, or one that could not run) as the agent claimed."""
    if verdict is not None and verdict.status is not VerdictStatus.UNCHECKED:
        return verdict.passed
    return claimed_success


def standing_verdict(claimed_success: bool, window_s: int, now: datetime, checked_by: str) -> Verdict | None:
    """A `publisher` check's verdict: the agent's reported success stands, passed, until the
    window ends or the publisher disputes it; a failure the agent reports itself needs no
    verdict (None: it stands as reported, as any outcome without a check)."""
    if not claimed_success:
        return None
    until = (now + timedelta(seconds=window_s)).isoformat(timespec="seconds")
    return Verdict(
        status=VerdictStatus.PASSED,
        kind=PublisherCheck().kind,
        reason=f"the agent's success stands unless the publisher disputes it by {until}",
        checked_by=checked_by,
        at=now,
    )


def judge_output(check: BoardCheck, output: str, checked_by: str) -> Verdict:
    """The verdict of a deterministic check on `output`."""
    status, reason = (
        _against_schema(check, output)
        if isinstance(check, JsonSchemaCheck)
        else _against_expected(check, output)
    )
    return Verdict(status=status, kind=check.kind, reason=reason[:MAX_NOTE_CHARS], checked_by=checked_by)


def _against_schema(check: JsonSchemaCheck, output: str) -> tuple[VerdictStatus, str]:
    try:
        document = json.loads(output)
    except ValueError as exc:
        return VerdictStatus.FAILED, f"the output is not JSON: {exc}"
    errors = sorted(Draft202012Validator(check.json_schema).iter_errors(document), key=lambda e: list(e.path))
    if not errors:
        return VerdictStatus.PASSED, "the output satisfies the schema"
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(the document)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return VerdictStatus.FAILED, f"at {where}: {first.message[:300]}{more}"


def _against_expected(check: ExpectedAnswer, output: str) -> tuple[VerdictStatus, str]:
    answer = output.strip()
    if check.match is MatchMode.NUMBER:
        numbers = NUMBER.findall(answer)
        if not numbers:
            return VerdictStatus.FAILED, "the output holds no number"
        got, wanted = _as_number(numbers[-1]), _as_number(check.expected)
        if abs(got - wanted) <= check.tolerance:
            return VerdictStatus.PASSED, f"{numbers[-1]} is within {check.tolerance:g} of {check.expected}"
        return VerdictStatus.FAILED, f"{numbers[-1]} is not within {check.tolerance:g} of {check.expected}"
    flags = 0 if check.case_sensitive else regex.IGNORECASE
    if check.match is MatchMode.REGEX:
        try:
            matched = regex.fullmatch(check.expected, answer, flags=flags, timeout=REGEX_SECONDS)
        except TimeoutError:
            return VerdictStatus.UNCHECKED, f"the pattern took longer than {REGEX_SECONDS:g} s to match"
        if matched:
            return VerdictStatus.PASSED, "the output matches the pattern"
        return VerdictStatus.FAILED, f"the output does not match {check.expected[:200]!r}"
    same = (
        answer == check.expected if check.case_sensitive else answer.casefold() == check.expected.casefold()
    )
    if same:
        return VerdictStatus.PASSED, "the output is the expected answer"
    return VerdictStatus.FAILED, f"expected {check.expected[:200]!r}, got {answer[:200]!r}"


NUMBER = regex.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
"""A number as people write one: digits with thousands commas, a decimal part, an exponent."""


def _as_number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return math.nan


def _depth(value: Any, level: int = 1) -> int:
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level
