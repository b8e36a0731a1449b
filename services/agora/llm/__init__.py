"""Model access for Agora: one small client interface (`ModelClient`) with real backends
(Dapr's Conversation API, OpenAI-compatible HTTP) and a deterministic offline backend for
tests and the embedded default."""

from agora.llm.client import (
    ChatMessage,
    Completion,
    MeteredModel,
    ModelClient,
    ModelError,
    ModelOutputInvalid,
    ModelPrice,
    ModelToolCall,
    ModelUnavailable,
    TextSink,
    ToolChoice,
    ToolSpec,
    TracedModelClient,
    Usage,
    complete_json,
    extract_json_object,
    priced_calls,
    streaming_text,
)
from agora.llm.dapr_conversation import DaprConversationClient
from agora.llm.offline import OfflineModelClient
from agora.llm.openai_compatible import OpenAICompatibleClient
from agora.llm.settings import ModelSettings, model_client_from_settings

__all__ = [
    "ChatMessage",
    "Completion",
    "DaprConversationClient",
    "MeteredModel",
    "ModelClient",
    "ModelError",
    "ModelOutputInvalid",
    "ModelPrice",
    "ModelSettings",
    "ModelToolCall",
    "ModelUnavailable",
    "OfflineModelClient",
    "OpenAICompatibleClient",
    "TextSink",
    "ToolChoice",
    "ToolSpec",
    "TracedModelClient",
    "Usage",
    "complete_json",
    "extract_json_object",
    "model_client_from_settings",
    "priced_calls",
    "streaming_text",
]
