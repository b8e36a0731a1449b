"""The deterministic offline model: the embedded default and the backend of the tests.

It is not a language model. It exists so the whole system (agents, market, benchmarks) runs
without a vendor account or network, reproducibly: the same messages always give the same
answer. With a JSON schema it builds an object that conforms to the schema, its values taken
from a stable hash (sha256) of the messages and of each value's path in the object, so
different prompts give different but valid answers and numbers spread over their range.
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
            if json_schema is not None:
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
