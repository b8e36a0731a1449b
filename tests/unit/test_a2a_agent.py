"""An A2A agent on the market, its pure parts: where its card is read, how its card becomes a
capability profile (bounded, its terms from Agora's extension), and how its reply becomes an
outcome (bounded, out-of-protocol replies refused)."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentSkill,
    Artifact,
    Message,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct, Value

from agora.core.a2a_terms import BID_OFFER_KEY, MARKET_EXTENSION_URI
from agora.core.errors import BidNotMade
from agora.core.limits import MAX_SKILL_TAGS, MAX_TEXT_CHARS
from agora.core.models import CapabilityProfile, ModelTier
from agora.sdk import A2AAgent
from agora.sdk._a2a import (
    MAX_REPLY_EVENTS,
    A2AReply,
    CardUnreadable,
    OutOfProtocol,
    bid_offer_in,
    card_location,
    card_profile,
    through_sidecar,
)
from agora.sdk._app_files import a2a_agents


def card(*skills: AgentSkill, terms: dict[str, float | int | bool] | None = None) -> AgentCard:
    extensions = []
    if terms is not None:
        params = Struct()
        params.update(terms)
        extensions.append(AgentExtension(uri=MARKET_EXTENSION_URI, params=params))
    return AgentCard(name="Poet", skills=list(skills), capabilities=AgentCapabilities(extensions=extensions))


def profile_of(
    agent_card: AgentCard, price: float | None = None, steps: int | None = None
) -> CapabilityProfile:
    return card_profile(agent_card, "poet", price_per_step=price, max_steps=steps, tier=ModelTier.BALANCED)


def test_a_card_url_is_read_as_given_or_at_the_well_known_path() -> None:
    assert card_location("http://127.0.0.1:9100") == "http://127.0.0.1:9100/.well-known/agent-card.json"
    assert card_location("http://h:1/agents/x/") == "http://h:1/agents/x/.well-known/agent-card.json"
    assert card_location("https://h/cards/poet.json") == "https://h/cards/poet.json"
    for bad in ("ftp://h/x", "http:///nohost", "127.0.0.1:9100"):
        with pytest.raises(ValueError, match="http\\(s\\) URL with a host"):
            card_location(bad)
    with pytest.raises(ValueError, match="http\\(s\\) URL"):
        A2AAgent("poet", "file:///etc/passwd")


def test_every_call_to_the_agent_goes_through_the_app_s_sidecar() -> None:
    assert (
        through_sidecar("http://127.0.0.1:9100/a2a?x=1", "http://127.0.0.1:3500/")
        == "http://127.0.0.1:3500/v1.0/invoke/http://127.0.0.1:9100/method/a2a?x=1"
    )
    assert through_sidecar("https://h:8443", "http://s") == "http://s/v1.0/invoke/https://h:8443/method/"


def test_a_card_s_skill_ids_and_tags_are_the_profile_s_skills_less_blank_repeated_and_long_ones() -> None:
    profile = profile_of(
        card(
            AgentSkill(id="haiku", tags=["poetry", " verse ", "poetry"]),
            AgentSkill(id="limerick", tags=["", "x" * 65, "verse"]),
        )
    )
    assert profile.skill_tags == ["haiku", "poetry", "verse", "limerick"]
    assert profile.agent_name == "Poet"
    many = card(*(AgentSkill(id=f"s{i}") for i in range(3 * MAX_SKILL_TAGS)))
    assert len(profile_of(many).skill_tags) == MAX_SKILL_TAGS
    with pytest.raises(CardUnreadable, match="offers no skill"):
        profile_of(card(AgentSkill(id=" ", tags=[""])))


def test_the_price_is_the_registration_s_else_the_card_s_market_terms_else_nothing() -> None:
    skill = AgentSkill(id="haiku")
    assert profile_of(card(skill)).cost_per_step_usd == 0.0
    termed = card(skill, terms={"price_per_step_usd": 0.003, "max_steps": 7})
    assert profile_of(termed).cost_per_step_usd == 0.003
    assert profile_of(termed).max_steps == 7
    given = profile_of(termed, price=0.01, steps=3)
    assert (given.cost_per_step_usd, given.max_steps) == (0.01, 3)
    with pytest.raises(CardUnreadable, match="market terms do not parse"):
        profile_of(card(skill, terms={"price_per_step_usd": -1}))
    with pytest.raises(CardUnreadable, match="market terms do not parse"):
        profile_of(card(skill, terms={"bids_for_itself": True}))


def said(text: str) -> Message:
    return Message(parts=[Part(text=text)])


def status(task_id: str, state: int, text: str = "") -> StreamResponse:
    update = TaskStatusUpdateEvent(task_id=task_id, status=TaskStatus(state=state, message=said(text)))  # type: ignore[arg-type]
    return StreamResponse(status_update=update)


def artifact(task_id: str, text: str, artifact_id: str = "a", append: bool = False) -> StreamResponse:
    made = Artifact(artifact_id=artifact_id, parts=[Part(text=text)])
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(task_id=task_id, artifact=made, append=append)
    )


def test_a_streamed_reply_s_artifacts_are_the_outcome_and_its_price_the_cost() -> None:
    reply = A2AReply("poet")
    submitted = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
    for event in (
        StreamResponse(task=submitted),
        status("t1", TaskState.TASK_STATE_WORKING, "drafting"),
        artifact("t1", "first line"),
        artifact("t1", " and the rest", append=True),
        artifact("t1", "a second artifact", artifact_id="b"),
    ):
        reply.take(event)
        assert not reply.ended
    reply.take(status("t1", TaskState.TASK_STATE_COMPLETED))
    assert reply.ended
    result = reply.result(0.002)
    assert result.success and not result.partial
    assert result.summary == "first line and the rest\n\na second artifact"
    assert result.cost_usd == 0.002


def test_a_reply_that_is_a_message_is_the_whole_answer() -> None:
    reply = A2AReply("poet")
    reply.take(StreamResponse(message=said("just this")))
    assert reply.ended and reply.result(0.0).summary == "just this"


def test_a_failed_or_interrupted_task_gives_a_failure_with_what_the_agent_said() -> None:
    failed = A2AReply("poet")
    failed.take(status("t1", TaskState.TASK_STATE_FAILED, "out of ink"))
    result = failed.result(0.0)
    assert not result.success
    assert result.summary == "the A2A agent poet ended its task FAILED: out of ink"
    asking = A2AReply("poet")
    asking.take(status("t1", TaskState.TASK_STATE_INPUT_REQUIRED, "which season?"))
    assert asking.ended
    assert "asked for input (INPUT_REQUIRED): which season?, and nobody" in asking.result(0.0).summary


def test_an_oversized_artifact_is_cut_and_the_outcome_says_so() -> None:
    reply = A2AReply("poet")
    reply.take(artifact("t1", "x" * (MAX_TEXT_CHARS + 500)))
    reply.take(artifact("t1", "more", append=True))
    reply.take(status("t1", TaskState.TASK_STATE_COMPLETED))
    result = reply.result(0.0)
    assert result.success and result.partial
    assert len(result.summary) == MAX_TEXT_CHARS
    assert result.summary.endswith(f"(cut at {MAX_TEXT_CHARS} characters)")


def test_replies_out_of_protocol_are_refused() -> None:
    mixed = A2AReply("poet")
    mixed.take(status("t1", TaskState.TASK_STATE_WORKING))
    with pytest.raises(OutOfProtocol, match="two tasks"):
        mixed.take(status("t2", TaskState.TASK_STATE_WORKING))
    with pytest.raises(OutOfProtocol, match="without its task's id"):
        A2AReply("poet").take(status("", TaskState.TASK_STATE_WORKING))
    with pytest.raises(OutOfProtocol, match="neither a task"):
        A2AReply("poet").take(StreamResponse())
    endless = A2AReply("poet")
    with pytest.raises(OutOfProtocol, match=f"more than {MAX_REPLY_EVENTS} events"):
        for _ in range(MAX_REPLY_EVENTS + 1):
            endless.take(status("t1", TaskState.TASK_STATE_WORKING))


def data_message(payload: dict[str, object]) -> StreamResponse:
    struct = Struct()
    struct.update(payload)  # type: ignore[arg-type]
    return StreamResponse(message=Message(parts=[Part(text="here"), Part(data=Value(struct_value=struct))]))


def test_a_bid_answer_is_the_offer_in_its_message_s_data_part_and_anything_else_is_refused_with_why() -> None:
    offer = {"self_reported_success_prob": 0.7, "estimated_cost_usd": 0.01, "estimated_steps": 3}
    made = bid_offer_in("poet", data_message({BID_OFFER_KEY: offer}))
    assert (made.self_reported_success_prob, made.estimated_cost_usd, made.estimated_steps) == (0.7, 0.01, 3)
    with pytest.raises(BidNotMade, match="with a task, not a message"):
        bid_offer_in("poet", StreamResponse(task=Task(id="t1")))
    with pytest.raises(BidNotMade, match="without a 'bid_offer' data part"):
        bid_offer_in("poet", StreamResponse(message=said("I would do it gladly")))
    with pytest.raises(BidNotMade, match="out of contract"):
        bid_offer_in("poet", data_message({BID_OFFER_KEY: {**offer, "self_reported_success_prob": 3}}))


def test_a2a_agents_are_named_to_an_agent_app_as_name_equals_card_url() -> None:
    named = a2a_agents(" poet=http://127.0.0.1:9100 ,, clerk=http://127.0.0.1:9101/card.json")
    assert [(a.agent_id, getattr(a, "card_url", None)) for a in named] == [
        ("poet", "http://127.0.0.1:9100"),
        ("clerk", "http://127.0.0.1:9101/card.json"),
    ]
    assert all(isinstance(a, A2AAgent) and a.bids == "market" and not a.runs_inline for a in named)
    for bad in ("poet", "=http://h", "poet=", "poet=ftp://h"):
        with pytest.raises(ValueError):
            a2a_agents(bad)
