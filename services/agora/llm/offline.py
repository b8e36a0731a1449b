"""The deterministic offline model: the embedded default and the backend of the tests.

It is not a language model. It exists so the whole system (agents, market, benchmarks) runs
without a vendor account or network, reproducibly: the same messages always give the same
answer. With a JSON schema it builds an object that conforms to the schema, its values taken
from a stable hash (sha256) of the messages and of each value's path in the object, so
different prompts give different but valid answers and numbers spread over their range.

An agent's step (a schema with `action` "tool" or "final", `tool`, `arguments` and `answer`,
as the SDK's agent loop asks) is answered as an agent would: when the conversation lists tools
(catalogue lines `- <name>: <description> Arguments (JSON Schema): {...}`) and it has called
none yet, it calls the listed tool whose name and description share the most words with the
task, its arguments built from the tool's schema (numbers the task holds, in order; the task's
words as text); then it answers in words taken from the task and the latest tool result.
Whether it says it did the task (`succeeded`, two times in three) is drawn from the hash of the
user's turns only (the task, tool results, a person's answer), so some tasks fail, always the
same ones whichever agent runs them; how sure it is stays drawn from the whole conversation's
hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agora.llm.client import ChatMessage, Completion, ModelUnavailable, TracedModelClient, Usage

Override = Callable[[Sequence[ChatMessage]], str | None]

UNBOUNDED_RANGE = (1, 100)
"""Where numbers without bounds fall: small and positive, like most counts and prices."""
MAX_DEPTH = 8
"""Below this depth recursive schemas stop growing (optional values become null, arrays minimal)."""
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def word_count(text: str) -> int:
    return len(text.split())


def messages_digest(messages: Sequence[ChatMessage]) -> bytes:
    """A stable fingerprint of a conversation (never `hash()`, which is salted per process)."""
    canonical = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).digest()


class OfflineModelClient(TracedModelClient):
    """Deterministic stand-in for a model; see the module docstring.

    `latency_s` delays every answer (for timeout tests), `fail_every=n` makes every n-th call
    raise `ModelUnavailable` (for failure handling tests) and `overrides` lets a test force the
    answer to particular messages (return None to fall through to the generated answer).
    """

    backend = "offline"

    def __init__(
        self,
        *,
        model: str = "offline-deterministic",
        latency_s: float = 0.0,
        fail_every: int | None = None,
        overrides: Override | None = None,
    ) -> None:
        if fail_every is not None and fail_every < 1:
            raise ValueError("fail_every must be a positive integer")
        self.model = model
        self.latency_s = latency_s
        self.fail_every = fail_every
        self.overrides = overrides
        self.calls = 0

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> Completion:
        self.calls += 1
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        if self.fail_every is not None and self.calls % self.fail_every == 0:
            raise ModelUnavailable(f"offline model: simulated outage on call {self.calls}")
        text = self.overrides(messages) if self.overrides is not None else None
        if text is None:
            seed = messages_digest(messages)
            if json_schema is not None and is_agent_step(json_schema):
                text = json.dumps(agent_step(messages, json_schema, seed), sort_keys=True)
            elif json_schema is not None:
                text = json.dumps(SchemaValueGenerator(json_schema, seed).generate(), sort_keys=True)
            else:
                text = _text_answer(messages, seed)
        prompt_tokens = sum(word_count(m.content) for m in messages)
        return Completion(
            text=text,
            model=self.model,
            backend=self.backend,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=word_count(text)),
        )


def _text_answer(messages: Sequence[ChatMessage], seed: bytes) -> str:
    last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    topic = " ".join(last_user.split()[:8]) or "nothing"
    return f"[offline {seed.hex()[:8]}] Deterministic reply about: {topic}"


# -- an agent's step ----------------------------------------------------------------------------

AGENT_STEP_FIELDS = frozenset({"action", "tool", "arguments", "answer"})
"""The fields of a schema that asks for an agent's step (with `action` "tool" or "final")."""
TOOL_RESULT_PREFIX = "Result of tool "
"""How a tool's result comes back to the model, as the next user message."""
_CATALOGUE_LINE = re.compile(
    r"^- (?P<name>\S+?): (?P<description>.*?) ?Arguments \(JSON Schema\): (?P<parameters>\{.*\})$",
    re.MULTILINE,
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z0-9]+")
MAX_TOPIC_CHARS = 200
FAILS_ONE_IN = 3
"""An agent's step says it did the task two times in three: failure paths (triage, recovery,
replans) have work to do, and most tasks, plans and graphs still get done."""


class ListedTool:
    """A tool as the conversation's catalogue lists it."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters

    def words(self) -> set[str]:
        return _words(f"{self.name.replace('_', ' ')} {self.description}")


def is_agent_step(schema: dict[str, Any]) -> bool:
    """Whether `schema` asks for an agent's step: a tool call or the final answer."""
    resolved = SchemaValueGenerator(schema, b"").resolve(schema)
    properties: dict[str, Any] = resolved.get("properties") or {}
    if not properties.keys() >= AGENT_STEP_FIELDS:
        return False
    action = SchemaValueGenerator(schema, b"").resolve(properties["action"])
    return {"tool", "final"} <= set(action.get("enum") or [])


def listed_tools(messages: Sequence[ChatMessage]) -> list[ListedTool]:
    """The tools the system messages offer, in the order listed."""
    tools: list[ListedTool] = []
    for message in messages:
        if message.role != "system":
            continue
        for line in _CATALOGUE_LINE.finditer(message.content):
            try:
                parameters = json.loads(line["parameters"])
            except json.JSONDecodeError:
                parameters = None
            schema = parameters if isinstance(parameters, dict) else {}
            tools.append(ListedTool(line["name"], line["description"], schema))
    return tools


def agent_step(messages: Sequence[ChatMessage], schema: dict[str, Any], seed: bytes) -> dict[str, Any]:
    """The agent's next step: a listed tool first, then the final answer (see the module)."""
    step: dict[str, Any] = SchemaValueGenerator(schema, seed).generate()
    task = next((m.content for m in messages if m.role == "user"), "")
    topic = _topic(task)
    results = [m.content.removeprefix(TOOL_RESULT_PREFIX) for m in messages if _is_tool_result(m)]
    result = results[-1] if results else None
    tools = listed_tools(messages)
    if tools and not any(_asked_for_a_tool(m) for m in messages):
        chosen = _best_tool(tools, task)
        return _with(
            step,
            action="tool",
            tool=chosen.name,
            arguments=ToolArguments(chosen.parameters, seed, task).generate(),
            answer="",
            thought=f"{chosen.name} may help with: {topic}",
        )
    done = "succeeded" not in step or _did_the_task(messages)
    said = f"Done: {topic}" if done else f"Could not finish: {topic}"
    if result is not None:
        name, _, output = result.partition(": ")
        said += f"; {name} gave {' '.join(output.split())[:MAX_TOPIC_CHARS]}"
    thought = "I have what the task asks for" if done else "I cannot finish this task"
    return _with(step, action="final", tool="", arguments={}, answer=said, thought=thought, succeeded=done)


def _with(step: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """`step` with `fields`, those its schema has (the generator gave it every one)."""
    return {**step, **{name: value for name, value in fields.items() if name in step}}


def _did_the_task(messages: Sequence[ChatMessage]) -> bool:
    """Whether the agent says it did the task: drawn from the user's turns alone (the task, a
    tool's result, a person's answer, a recovery note), so a task fares the same whichever
    agent's prompt runs it, and a new attempt draws again."""
    said_by_user = messages_digest([m for m in messages if m.role == "user"])
    return SchemaValueGenerator({}, said_by_user).draw("$.succeeded", "verdict") % FAILS_ONE_IN != 0


def _asked_for_a_tool(message: ChatMessage) -> bool:
    """Whether `message` is an agent's step that called a tool (one the runner may have held
    for a person, who may have skipped it: it is not asked for again)."""
    if message.role != "assistant":
        return False
    try:
        step = json.loads(message.content)
    except json.JSONDecodeError:
        return False
    return isinstance(step, dict) and step.get("action") == "tool"


def _is_tool_result(message: ChatMessage) -> bool:
    return message.role in ("user", "tool") and message.content.startswith(TOOL_RESULT_PREFIX)


def _topic(task: str) -> str:
    """The task in one line, as the answer quotes it."""
    line = " ".join(task.split())
    return (line[: MAX_TOPIC_CHARS - 3] + "...") if len(line) > MAX_TOPIC_CHARS else (line or "the task")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _best_tool(tools: list[ListedTool], task: str) -> ListedTool:
    """The tool sharing the most words with the task; the first listed among equals."""
    asked = _words(task)
    return max(tools, key=lambda tool: (len(tool.words() & asked), -tools.index(tool)))


class SchemaValueGenerator:
    """Builds a value conforming to a JSON Schema (the subset pydantic emits), every choice
    drawn from sha256(seed, path)."""

    def __init__(self, schema: dict[str, Any], seed: bytes) -> None:
        self.root = schema
        self.seed = seed

    def generate(self) -> Any:
        return self.value(self.root, "$", 0)

    # -- randomness, deterministic per path ------------------------------------------------------

    def draw(self, path: str, salt: str = "") -> int:
        digest = hashlib.sha256(self.seed + f"\x00{path}\x00{salt}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def fraction(self, path: str) -> float:
        """Strictly inside (0, 1), so exclusive bounds are never hit."""
        return (self.draw(path, "fraction") % 999_999 + 1) / 1_000_000

    # -- schema walking --------------------------------------------------------------------------

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Follow `$ref`s (`#/$defs/...` as pydantic emits them) and merge `allOf` parts."""
        while "$ref" in schema:
            target: Any = self.root
            for part in schema["$ref"].removeprefix("#/").split("/"):
                if part:
                    target = target[part.replace("~1", "/").replace("~0", "~")]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged = {**self.resolve(part), **merged}
            schema = merged
        return schema

    def value(self, schema: dict[str, Any] | bool, path: str, depth: int) -> Any:
        if not isinstance(schema, dict):
            return self.string({}, path)
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            options = schema["enum"]
            return options[self.draw(path, "enum") % len(options)]
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.value(self.choose_branch(schema[key], path, depth), path, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            non_null = [k for k in kind if k != "null"]
            if not non_null or (depth >= MAX_DEPTH and "null" in kind):
                return None
            kind = non_null[self.draw(path, "type") % len(non_null)]
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        match kind:
            case "object":
                return self.object(schema, path, depth)
            case "array":
                return self.array(schema, path, depth)
            case "string":
                return self.string(schema, path)
            case "integer":
                return int(self.numeric(schema, path, integer=True))
            case "number":
                return self.numeric(schema, path, integer=False)
            case "boolean":
                return self.draw(path, "bool") % 2 == 0
            case "null":
                return None
        raise ValueError(f"offline model cannot generate JSON Schema type {kind!r} at {path}")

    def choose_branch(self, branches: list[Any], path: str, depth: int) -> Any:
        """A non-null branch (answers with content are the useful ones), except where a
        recursive schema has to stop."""
        non_null = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if not non_null or (depth >= MAX_DEPTH and len(non_null) < len(branches)):
            return {"type": "null"}
        return non_null[self.draw(path, "branch") % len(non_null)]

    def object(self, schema: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        result: dict[str, Any] = {}
        for name, sub in properties.items():
            if depth >= MAX_DEPTH and name not in required:
                continue
            result[name] = self.value(sub, f"{path}.{name}", depth + 1)
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict):
            count = max(schema.get("minProperties", 0), 0 if depth >= MAX_DEPTH else 2)
            keys = schema.get("propertyNames", {"type": "string"})
            for i in range(count):
                key = str(self.value(keys, f"{path}{{key{i}}}", depth + 1))
                result[key] = self.value(extra, f"{path}.{key}", depth + 1)
        return result

    def array(self, schema: dict[str, Any], path: str, depth: int) -> list[Any]:
        prefix: list[Any] = schema.get("prefixItems", [])
        low = max(schema.get("minItems", 0), len(prefix))
        high = schema.get("maxItems", max(low, 3) if depth < MAX_DEPTH else low)
        if schema.get("items") is False or ("items" not in schema and prefix):
            high = len(prefix)
        length = low + self.draw(path, "length") % (high - low + 1) if depth < MAX_DEPTH else low
        items = schema.get("items", {})
        values: list[Any] = []
        attempts = 0
        while len(values) < length and attempts < length * 10:
            index = len(values)
            sub = prefix[index] if index < len(prefix) else items
            candidate = self.value(sub, f"{path}[{index}]" + (f"#{attempts}" if attempts else ""), depth + 1)
            attempts += 1
            if schema.get("uniqueItems") and candidate in values:
                continue
            values.append(candidate)
        return values

    def string(self, schema: dict[str, Any], path: str) -> str:
        n = self.draw(path, "string")
        fmt = schema.get("format")
        if fmt == "date-time":
            return (_EPOCH + timedelta(seconds=n % (365 * 86400))).isoformat().replace("+00:00", "Z")
        if fmt == "date":
            return (_EPOCH + timedelta(days=n % 365)).date().isoformat()
        if fmt == "time":
            return f"{n % 24:02d}:{n // 24 % 60:02d}:{n // 1440 % 60:02d}"
        if fmt == "uuid":
            return str(uuid.UUID(int=n << 64 | self.draw(path, "uuid"), version=4))
        if fmt == "email":
            return f"agent{n % 10_000}@example.com"
        if fmt in ("uri", "url"):
            return f"https://example.com/{n % 10_000}"
        names = re.findall(r"[A-Za-z_]\w*", path)
        text = f"{names[-1] if names else 'value'}-{n:016x}"
        minimum = schema.get("minLength", 0)
        while len(text) < minimum:
            text += f"{n:016x}"
        return text[: schema["maxLength"]] if "maxLength" in schema else text

    def bounds(self, schema: dict[str, Any], integer: bool) -> tuple[float, float]:
        """The allowed [low, high] range; exclusive bounds are moved inwards for integers and
        kept (but never hit, see `fraction`) for numbers."""
        low: float | None = schema.get("minimum")
        high: float | None = schema.get("maximum")
        if "exclusiveMinimum" in schema:
            bound = schema["exclusiveMinimum"]
            bound = math.floor(bound) + 1 if integer else bound
            low = bound if low is None else max(low, bound)
        if "exclusiveMaximum" in schema:
            bound = schema["exclusiveMaximum"]
            bound = math.ceil(bound) - 1 if integer else bound
            high = bound if high is None else min(high, bound)
        width = UNBOUNDED_RANGE[1] - UNBOUNDED_RANGE[0]
        if low is None and high is None:
            low, high = UNBOUNDED_RANGE
        elif low is None:
            assert high is not None
            low = UNBOUNDED_RANGE[0] if high >= UNBOUNDED_RANGE[1] else high - width
        elif high is None:
            high = max(low, 0) + width
        if low > high:
            raise ValueError(f"offline model: empty numeric range in schema {schema}")
        return low, high

    def numeric(self, schema: dict[str, Any], path: str, *, integer: bool) -> float:
        """A number spread over the allowed range by the path's hash."""
        low, high = self.bounds(schema, integer)
        step: float | None = schema.get("multipleOf", 1 if integer else None)
        if step is not None:
            first, last = math.ceil(low / step), math.floor(high / step)
            if first > last:
                raise ValueError(f"offline model: no multiple of {step} in [{low}, {high}] at {path}")
            multiple: float = (first + self.draw(path, "multiple") % (last - first + 1)) * step
            return round(multiple, 10) if isinstance(step, float) else multiple
        value = low + self.fraction(path) * (high - low)
        rounded = round(value, 4)
        strict_low, strict_high = "exclusiveMinimum" in schema, "exclusiveMaximum" in schema
        if (rounded > low if strict_low else rounded >= low) and (
            rounded < high if strict_high else rounded <= high
        ):
            return rounded
        return value


class ToolArguments(SchemaValueGenerator):
    """A tool's arguments for a task: numbers the task holds, in order, where a number fits;
    the task's words where text does (a string of no particular format); the rest drawn as
    for any schema."""

    def __init__(self, schema: dict[str, Any], seed: bytes, task: str) -> None:
        super().__init__(schema, seed)
        self.numbers = [float(n) for n in _NUMBER.findall(task)]
        self.text = _topic(task)

    def numeric(self, schema: dict[str, Any], path: str, *, integer: bool) -> float:
        if self.numbers:
            low, high = self.bounds(schema, integer)
            candidate = self.numbers[0]
            fits = low <= candidate <= high and (not integer or candidate.is_integer())
            if fits and "multipleOf" not in schema:
                self.numbers.pop(0)
                return candidate
        return super().numeric(schema, path, integer=integer)

    def string(self, schema: dict[str, Any], path: str) -> str:
        if schema.get("format") or schema.get("pattern"):
            return super().string(schema, path)
        text = self.text
        if len(text) < schema.get("minLength", 0):
            return super().string(schema, path)
        return text[: schema["maxLength"]] if "maxLength" in schema else text
