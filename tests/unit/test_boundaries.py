"""Input at the edge: bounds declared once and checked fast, one error body for every kind of
failure, permanent errors dead-lettered at once, and decisions checked against their record."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, ValidationError

from agora.core import models
from agora.core.errors import Internal, InvalidArgument, NotFound
from agora.core.escalation.context import EscalationContext
from agora.core.escalation.decisions import EscalationResponse
from agora.core.escalation.record import WaitingParty, WaitingPartyKind, park, resolve
from agora.core.limits import MAX_BODY_BYTES, MAX_SKILL_TAGS, MAX_TEXT_CHARS, clean_skill_tags
from agora.core.market import TaskSpec
from agora.core.messages import EscalationResolved
from agora.core.models import CapabilityProfile
from agora.core.topics import channel
from agora.runtime.pubsub import MessageDeduplicator, Subscriptions
from agora.runtime.service import create_service_app
from agora.runtime.settings import ServiceSettings
from agora.runtime.sidecar import DaprError, SidecarUnavailable

# -- bounds -----------------------------------------------------------------------------------


# How long these checks take on oversized input is measured by `bench/input_bounds.py`; here,
# the properties that keep them fast, without a clock.


class ComparedTag(str):
    """A skill tag that counts how often tags are compared for equality (its stripped copy is
    one too), to tell a linear deduplication from one that compares each tag with the others."""

    comparisons: ClassVar[int] = 0

    def strip(self, chars: str | None = None) -> ComparedTag:
        return ComparedTag(str.strip(self, chars))

    def __eq__(self, other: object) -> bool:
        ComparedTag.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_skill_tags_are_deduplicated_in_order_in_linear_time() -> None:
    assert clean_skill_tags([" a", "b", "a ", "c", "b"]) == ["a", "b", "c"]
    many: list[str] = [ComparedTag(f" tag{i % 500}") for i in range(5_000)]
    ComparedTag.comparisons = 0
    assert clean_skill_tags(many) == [f"tag{i}" for i in range(500)]
    # A repeat is found by its hash: about one comparison per tag, where comparing each new tag
    # with those kept would take hundreds.
    assert ComparedTag.comparisons <= len(many), ComparedTag.comparisons


def test_a_profile_with_too_many_tags_is_refused_on_its_length_alone_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cleaned: list[int] = []

    def counted_clean(tags: list[str]) -> list[str]:
        cleaned.append(len(tags))
        return clean_skill_tags(tags)

    monkeypatch.setattr(models, "clean_skill_tags", counted_clean)
    tags = [f"t{i}" for i in range(MAX_SKILL_TAGS)]
    # Past the bound, items that are no tags at all: looking at any of them would be an error.
    with pytest.raises(ValidationError) as info:
        CapabilityProfile(agent_id="a", agent_name="A", skill_tags=[*tags, *[None] * 10_000])  # type: ignore[list-item]
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("too_long", ("skill_tags",))]
    assert cleaned == []  # refused before the tags were cleaned
    assert CapabilityProfile(agent_id="a", agent_name="A", skill_tags=tags)
    assert cleaned == [MAX_SKILL_TAGS]


def test_overlong_text_is_refused() -> None:
    base = {"task_id": "t", "required_skills": ["s"]}
    assert TaskSpec.model_validate({**base, "description": "d" * MAX_TEXT_CHARS})
    with pytest.raises(ValidationError) as info:
        TaskSpec.model_validate({**base, "description": "d" * (MAX_TEXT_CHARS + 1)})
    assert info.value.errors()[0]["loc"] == ("description",)
    with pytest.raises(ValidationError):
        TaskSpec.model_validate({**base, "description": "d", "required_skills": ["x" * 65]})


# -- one error body ---------------------------------------------------------------------------


class Echo(BaseModel):
    text: str


def app_with_routes() -> FastAPI:
    def setup(_: Any, app: FastAPI) -> None:
        @app.post("/v1/echo")
        async def echo(body: Echo) -> Echo:
            return body

        @app.get("/v1/missing")
        async def missing() -> None:
            raise NotFound("no such thing", thing="x")

        @app.get("/v1/domain")
        async def domain() -> None:
            raise NotFound("no task 'x' on the board")

        @app.get("/v1/boom")
        async def boom() -> None:
            raise RuntimeError("secret internals")

        @app.get("/v1/silent-sidecar")
        async def silent_sidecar() -> None:
            raise SidecarUnavailable("PUT /v1.0/actors/Task/t-1/method/get_task: TimeoutError()")

        @app.get("/v1/refusing-sidecar")
        async def refusing_sidecar() -> None:
            raise DaprError(500, "ERR_ACTOR_INVOKE_METHOD", "context deadline exceeded")

    from agora.runtime.service import ServiceModule

    return create_service_app(ServiceSettings(app_id="test"), [ServiceModule("test", setup=setup)])


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    transport = httpx.ASGITransport(app=app_with_routes(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        yield http


def assert_error_body(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error", "message", "details"} and body["error"] == code, body
    assert "Traceback" not in answer.text
    return dict(body)


async def test_every_failure_answers_the_same_error_body(client: httpx.AsyncClient) -> None:
    invalid = assert_error_body(await client.post("/v1/echo", json={"text": 3}), 422, "INVALID_ARGUMENT")
    assert invalid["details"]["errors"] == [
        {"loc": ["body", "text"], "msg": "Input should be a valid string", "type": "string_type"}
    ]
    assert invalid["message"] == "invalid request: body.text: Input should be a valid string"
    malformed = assert_error_body(
        await client.post("/v1/echo", content=b"{nope", headers={"content-type": "application/json"}),
        422,
        "INVALID_ARGUMENT",
    )
    assert malformed["details"]["errors"][0]["type"] == "json_invalid"
    assert_error_body(await client.get("/v1/missing"), 404, "NOT_FOUND")
    assert_error_body(await client.get("/v1/domain"), 404, "NOT_FOUND")
    assert_error_body(await client.get("/v1/nowhere"), 404, "NOT_FOUND")
    assert_error_body(await client.delete("/v1/echo"), 405, "METHOD_NOT_ALLOWED")
    internal = assert_error_body(await client.get("/v1/boom"), 500, "INTERNAL")
    assert "secret" not in internal["message"]


async def test_a_sidecar_that_does_not_answer_or_fails_answers_a_typed_503_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    # Exceptions the app lets escape are raised here: an answer given by a handler that also
    # re-raises (as the framework's catch-all does, for the server to log a traceback) fails.
    transport = httpx.ASGITransport(app=app_with_routes(), raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        silent = assert_error_body(await client.get("/v1/silent-sidecar"), 503, "UNAVAILABLE")
        assert "did not answer in time" in silent["message"] and "get_task" in silent["message"]
        refused = assert_error_body(await client.get("/v1/refusing-sidecar"), 503, "UNAVAILABLE")
        assert refused["details"] == {"dapr_error": "ERR_ACTOR_INVOKE_METHOD"}


async def test_an_oversized_body_is_refused_before_it_is_read(client: httpx.AsyncClient) -> None:
    huge = json.dumps({"text": "x" * (MAX_BODY_BYTES + 1)})
    body = assert_error_body(await client.post("/v1/echo", content=huge), 413, "PAYLOAD_TOO_LARGE")
    assert str(MAX_BODY_BYTES) in body["message"]

    async def chunks() -> Any:  # no Content-Length: counted as it arrives
        for _ in range(3):
            yield b"x" * (MAX_BODY_BYTES // 2)

    streamed = await client.post("/v1/echo", content=chunks())
    assert_error_body(streamed, 413, "PAYLOAD_TOO_LARGE")
    assert (await client.post("/v1/echo", json={"text": "x" * 1000})).status_code == 200


# -- permanent and transient failures of handlers ------------------------------------------------


class Ping(BaseModel):
    n: int


PING = channel("agora.ping", Ping)


class Letters:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def dead_letter(self, letter: Any) -> None:
        self.sent.append(letter)


@pytest.mark.parametrize(
    ("failure", "status", "dead_lettered"),
    [
        (NotFound("no escalation x"), "SUCCESS", "NOT_FOUND: no escalation x"),
        (NotFound("no escalation x"), "SUCCESS", "NOT_FOUND: no escalation x"),
        (InvalidArgument("bad"), "SUCCESS", "INVALID_ARGUMENT: bad"),
        (Internal("state store unavailable"), "RETRY", None),
        (ConnectionError("sidecar restarting"), "RETRY", None),
    ],
    ids=["domain", "404", "422", "503", "transport"],
)
async def test_permanent_failures_are_dead_lettered_at_once_transient_ones_retried(
    failure: Exception, status: str, dead_lettered: str | None
) -> None:
    letters = Letters()
    subs = Subscriptions(ServiceSettings(), publisher=letters, deduplicator=MessageDeduplicator(None, 60))  # type: ignore[arg-type]

    async def handler(_: Ping) -> None:
        raise failure

    subs.subscribe(PING, handler)
    [sub] = subs._subscriptions
    event = json.dumps({"id": f"e-{id(failure)}", "data": {"n": 1}}).encode()
    assert await subs.deliver(sub, event, {}) == status
    assert [letter.reason for letter in letters.sent] == ([dead_lettered] if dead_lettered else [])


async def test_a_payload_nested_too_deep_to_serialize_is_dead_lettered_as_its_text() -> None:
    letters = Letters()
    subs = Subscriptions(ServiceSettings(), publisher=letters, deduplicator=MessageDeduplicator(None, 60))  # type: ignore[arg-type]

    async def handler(_: Ping) -> None: ...

    subs.subscribe(PING, handler)
    [sub] = subs._subscriptions
    nested: Any = "bottom"
    for _ in range(300):
        nested = [nested]
    event = json.dumps({"id": "e-deep", "data": {"n": nested}}).encode()
    assert await subs.deliver(sub, event, {}) == "SUCCESS"  # refused: acknowledged, dead-lettered
    [letter] = letters.sent
    assert letter.reason == "payload failed validation"
    assert json.loads(letter.payload) == {"n": nested}  # nothing lost
    letter.model_dump(mode="json")  # and it can be published


# -- decisions checked against their record ------------------------------------------------------


def decided(action: str = "retry") -> Any:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    context = EscalationContext(
        job_id="s", step=1, validation_results=[], confidence=0.2, retry_count=0,
        error_history=[], prompt_used="p", output_summary="o",
    )  # fmt: skip
    record = park("s.2", WaitingParty(kind=WaitingPartyKind.SESSION, id="s"), context, now=now)
    return record, resolve(record, EscalationResponse.model_validate({"action": action}), "alice", "ok", now)


def test_the_announcement_of_a_record_agrees_with_it() -> None:
    _, record = decided()
    assert EscalationResolved.of(record).disagreement_with(record) is None


def test_a_forged_or_altered_decision_disagrees_with_the_record() -> None:
    waiting, record = decided()
    forged = EscalationResolved.of(record).model_copy(update={"decided_by": "mallory"})
    assert "decided_by" in str(forged.disagreement_with(record))
    other_action = EscalationResolved.of(decided("abort")[1])
    assert "decision" in str(other_action.disagreement_with(record))
    assert "has no decision" in str(EscalationResolved.of(record).disagreement_with(waiting))


# -- start-up ----------------------------------------------------------------------------------


class _ReadySidecar:
    async def wait_until_ready(self) -> None:
        return None


async def test_a_warm_up_that_fails_first_is_retried_and_earlier_modules_run_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agora.runtime import service

    monkeypatch.setattr("agora.runtime.service.asyncio.sleep", _no_sleep)
    ran: list[str] = []
    failures = iter([RuntimeError("app is not in a healthy state")])

    async def first(_: Any) -> None:
        ran.append("first")

    async def second(_: Any) -> None:
        ran.append("second")
        failure = next(failures, None)
        if failure is not None:
            raise failure

    ctx = service.ServiceContext(ServiceSettings(), _ReadySidecar(), None, None)  # type: ignore[arg-type]
    modules = [
        service.ServiceModule("first", setup=lambda *_: None, warm_up=first),
        service.ServiceModule("second", setup=lambda *_: None, warm_up=second),
    ]
    await service._warm(ctx, modules)
    assert ctx.ready.is_set()
    assert ran == ["first", "second", "second"]


_real_sleep = __import__("asyncio").sleep


async def _no_sleep(_: float) -> None:
    await _real_sleep(0)
