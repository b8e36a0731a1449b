"""Native tool calls on the Dapr Conversation API (alpha2): the request body the client builds
and the response it reads. daprd decodes requests with protojson and drops fields it does not
know, so every body here is also parsed strictly into the SDK's `ConversationRequestAlpha2`
(the proto daprd 1.18 is built from): a misspelled field fails the test instead of vanishing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dapr.proto.runtime.v1 import ai_pb2
from google.protobuf import json_format  # type: ignore[import-untyped]

from agora.llm import ChatMessage, DaprConversationClient, ModelError, ModelToolCall, ToolSpec
from agora.llm.dapr_conversation import completion_of, converse_request

MULTIPLY = ToolSpec(
    name="multiply",
    description="Multiply two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
ASK = ChatMessage(role="user", content="What is 17 times 23?")
CALL = ModelToolCall(id="call_1", name="multiply", arguments='{"a": 17, "b": 23}')


def as_daprd_reads_it(body: dict[str, Any]) -> Any:
    """The body decoded as daprd does, but refusing unknown fields; it must survive the round
    trip unchanged (nothing in it is outside the proto)."""
    request = json_format.ParseDict(body, ai_pb2.ConversationRequestAlpha2())
    assert json_format.MessageToDict(request) == body
    return request


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    [conversation] = body["inputs"]
    messages: list[dict[str, Any]] = conversation["messages"]
    return messages


def test_the_client_takes_tools_natively() -> None:
    assert DaprConversationClient.supports_tools is True


def test_tools_go_as_functions_with_the_tool_choice() -> None:
    body = converse_request([ASK], tools=[MULTIPLY], tool_choice="required")
    assert body["tools"] == [
        {
            "function": {
                "name": "multiply",
                "description": "Multiply two integers.",
                "parameters": MULTIPLY.parameters,
            }
        }
    ]
    assert body["toolChoice"] == "required"
    request = as_daprd_reads_it(body)
    [tool] = request.tools
    assert tool.function.name == "multiply" and request.tool_choice == "required"
    assert json_format.MessageToDict(tool.function.parameters) == MULTIPLY.parameters


def test_a_call_without_tools_names_no_tool_choice() -> None:
    # daprd refuses `required` without tools, and `auto` is its default with them.
    body = converse_request([ASK], tool_choice="required")
    assert "tools" not in body and "toolChoice" not in body
    as_daprd_reads_it(body)


def test_an_assistant_s_calls_go_as_tool_calls_without_an_empty_text_part() -> None:
    body = converse_request([ASK, ChatMessage(role="assistant", content="", tool_calls=[CALL])])
    assistant = messages_of(body)[1]
    assert assistant == {
        "ofAssistant": {
            "toolCalls": [
                {"id": "call_1", "function": {"name": "multiply", "arguments": '{"a": 17, "b": 23}'}}
            ]
        }
    }
    as_daprd_reads_it(body)


def test_an_assistant_s_text_goes_beside_its_calls() -> None:
    body = converse_request(
        [ASK, ChatMessage(role="assistant", content="Let me multiply.", tool_calls=[CALL])]
    )
    assistant = messages_of(body)[1]["ofAssistant"]
    assert assistant["content"] == [{"text": "Let me multiply."}]
    assert [c["id"] for c in assistant["toolCalls"]] == ["call_1"]
    as_daprd_reads_it(body)


def test_a_tool_result_names_its_call_and_the_tool_that_call_named() -> None:
    other = ModelToolCall(id="call_2", name="add", arguments='{"a": 1, "b": 2}')
    body = converse_request(
        [
            ASK,
            ChatMessage(role="assistant", content="", tool_calls=[CALL, other]),
            ChatMessage(role="tool", content="3", tool_call_id="call_2"),
            ChatMessage(role="tool", content="391", tool_call_id="call_1"),
        ]
    )
    results = messages_of(body)[2:]
    assert results == [
        {"ofTool": {"toolId": "call_2", "name": "add", "content": [{"text": "3"}]}},
        {"ofTool": {"toolId": "call_1", "name": "multiply", "content": [{"text": "391"}]}},
    ]
    request = as_daprd_reads_it(body)
    assert request.inputs[0].messages[3].of_tool.name == "multiply"


def test_a_result_whose_call_is_not_in_the_conversation_names_no_tool() -> None:
    body = converse_request([ASK, ChatMessage(role="tool", content="391", tool_call_id="call_9")])
    assert messages_of(body)[1] == {"ofTool": {"toolId": "call_9", "content": [{"text": "391"}]}}
    as_daprd_reads_it(body)


def test_a_required_call_begins_the_answer_with_the_opening() -> None:
    body = converse_request(
        [ASK], tools=[MULTIPLY], tool_choice="required", required_call_opening="<tool_call>\n"
    )
    assert messages_of(body) == [
        {"ofUser": {"content": [{"text": "What is 17 times 23?"}]}},
        {"ofAssistant": {"content": [{"text": "<tool_call>\n"}]}},
    ]
    as_daprd_reads_it(body)


@pytest.mark.parametrize("tool_choice", ["auto", "none"])
def test_only_a_required_call_is_begun_for_the_model(tool_choice: Any) -> None:
    body = converse_request(
        [ASK], tools=[MULTIPLY], tool_choice=tool_choice, required_call_opening="<tool_call>\n"
    )
    assert [next(iter(m)) for m in messages_of(body)] == ["ofUser"]


def test_a_required_call_without_an_opening_is_not_begun() -> None:
    body = converse_request([ASK], tools=[MULTIPLY], tool_choice="required")
    assert [next(iter(m)) for m in messages_of(body)] == ["ofUser"]


def test_tools_and_a_schema_go_together() -> None:
    schema = {
        "title": "Answer",
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    body = converse_request([ASK], json_schema=schema, tools=[MULTIPLY], tool_choice="auto")
    assert body["responseFormat"]["name"] == "Answer" and body["toolChoice"] == "auto"
    assert json.dumps(schema, sort_keys=True) in messages_of(body)[0]["ofUser"]["content"][0]["text"]
    as_daprd_reads_it(body)


def daprd_response(choice: ai_pb2.ConversationResultChoices) -> dict[str, Any]:
    """A response as daprd writes it (protojson of `ConversationResponseAlpha2`)."""
    response = ai_pb2.ConversationResponseAlpha2(
        outputs=[
            ai_pb2.ConversationResultAlpha2(
                choices=[choice],
                model="smollm2-135m",
                usage=ai_pb2.ConversationResultAlpha2CompletionUsage(
                    prompt_tokens=219, completion_tokens=83, total_tokens=302
                ),
            )
        ]
    )
    payload: dict[str, Any] = json.loads(json_format.MessageToJson(response))
    return payload


def test_the_choice_s_tool_calls_are_read_into_the_completion() -> None:
    payload = daprd_response(
        ai_pb2.ConversationResultChoices(
            finish_reason="tool_calls",
            message=ai_pb2.ConversationResultMessage(
                tool_calls=[
                    ai_pb2.ConversationToolCalls(
                        id="Y0me",
                        function=ai_pb2.ConversationToolCallsOfFunction(
                            name="multiply", arguments='{\n    "a": 17,\n    "b": 23\n}'
                        ),
                    ),
                    ai_pb2.ConversationToolCalls(
                        function=ai_pb2.ConversationToolCallsOfFunction(name="now"),
                    ),
                ]
            ),
        )
    )
    # The shape daprd sends: no `content` for a message of calls only, counts as strings.
    assert "content" not in payload["outputs"][0]["choices"][0]["message"]
    assert payload["outputs"][0]["usage"]["promptTokens"] == "219"
    completion = completion_of(payload, "agora-llm", "label")
    assert completion.tool_calls == [
        ModelToolCall(id="Y0me", name="multiply", arguments='{\n    "a": 17,\n    "b": 23\n}'),
        ModelToolCall(id="", name="now", arguments="{}"),
    ]
    assert completion.text == "" and completion.finish_reason == "tool_calls"
    assert completion.model == "smollm2-135m" and completion.backend == "dapr-conversation"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (219, 83)


def test_a_text_answer_has_no_tool_calls() -> None:
    payload = daprd_response(
        ai_pb2.ConversationResultChoices(
            finish_reason="stop", message=ai_pb2.ConversationResultMessage(content="It is 391.")
        )
    )
    completion = completion_of(payload, "agora-llm", "label")
    assert completion.text == "It is 391." and completion.tool_calls == []


def test_a_tool_call_without_its_function_is_a_model_error() -> None:
    payload = {
        "outputs": [{"choices": [{"finishReason": "tool_calls", "message": {"toolCalls": [{"id": "x"}]}}]}]
    }
    with pytest.raises(ModelError, match="malformed tool call"):
        completion_of(payload, "agora-llm", "label")


def test_no_choices_is_a_model_error_naming_the_component() -> None:
    with pytest.raises(ModelError, match="'agora-llm' returned no choices"):
        completion_of({"outputs": []}, "agora-llm", "label")
