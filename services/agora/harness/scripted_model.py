"""An OpenAI-compatible model endpoint on loopback whose verification verdicts a test or a
benchmark scripts, and whose answers it can hold back (a development tool, like the topic
recorder).

A service pointed at it (`AGORA_MODEL_BACKEND=openai`, `model_env`) reaches it over real HTTP
like any vendor endpoint. It answers the planner's verification prompts from `verdicts` (a queue per
marker and subgoal id; PASS once a queue is empty), and everything else as the offline model
would, planner and debate prompts included, so plans are the offline planner's and debaters
the offline debaters.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agora.debate import steps as debate_steps
from agora.llm import ChatMessage
from agora.llm.offline import OfflineModelClient
from agora.planner import steps as planner_steps
from agora.planner.steps import VERIFY_PROMPT


class ScriptedModel:
    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, str], list[str]] = {}
        """(marker in the task, subgoal id) → the verdicts to give, in order."""
        self._lock = threading.Lock()
        self._held: dict[tuple[str, tuple[str, ...]], tuple[str, threading.Event]] = {}
        self.asked: list[tuple[str, str]] = []
        """(first line of the system prompt, the user prompt) of every call."""
        self._waiting: set[str] = set()
        self._offline = OfflineModelClient(overrides=self._answer)

    def hold(self, marker: str, *keys: str, prompt: str = VERIFY_PROMPT) -> None:
        """Hold back answers to `prompt` (the start of a system prompt) whose messages hold
        `marker` and every one of `keys` (a subgoal id, a debater's name, a round) until
        `release`."""
        with self._lock:
            self._held[(marker, keys)] = (prompt, threading.Event())

    def holding(self, marker: str) -> bool:
        """Whether a verification request of `marker` is being held back now."""
        with self._lock:
            return marker in self._waiting

    def release(self, marker: str) -> None:
        with self._lock:
            for (held_marker, _), (_, event) in self._held.items():
                if held_marker == marker:
                    event.set()

    def script(self, marker: str, subgoal_id: str, *verdicts: str) -> None:
        with self._lock:
            self.verdicts[(marker, subgoal_id)] = list(verdicts)

    def _answer(self, messages: list[ChatMessage] | Any) -> str | None:
        system, user = messages[0].content, messages[-1].content
        with self._lock:
            self.asked.append((system.split("\n", 1)[0], user))
            held = [
                (marker, event)
                for (marker, keys), (prompt, event) in self._held.items()
                if system.startswith(prompt)
                and marker in user
                and all(k in f"{system}\n{user}" for k in keys)
            ]
            for marker, _ in held:
                self._waiting.add(marker)
        for marker, event in held:
            event.wait(timeout=120)
            with self._lock:
                self._waiting.discard(marker)
        if not system.startswith(VERIFY_PROMPT):
            return planner_steps.offline_answers(messages) or debate_steps.offline_answers(messages)
        found = re.search(r"^Subgoal: (\w+):", user, re.MULTILINE)
        subgoal_id = found.group(1) if found else ""
        verdict = "PASS"
        with self._lock:
            for (marker, scripted_id), queue in self.verdicts.items():
                if scripted_id == subgoal_id and marker in user and queue:
                    verdict = queue.pop(0)
                    break
        return json.dumps({"result": verdict, "reason": f"scripted {verdict}"})

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in body["messages"]]
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        completion = asyncio.run(self._offline.complete(messages, json_schema=schema))
        return {
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion.text}}],
            "usage": {
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
            },
        }


def model_env(base_url: str) -> dict[str, str]:
    """The environment that points a service's model client at the endpoint."""
    return {
        "AGORA_MODEL_BACKEND": "openai",
        "AGORA_MODEL_MODEL": "scripted",
        "AGORA_MODEL_OPENAI_BASE_URL": base_url,
        "AGORA_MODEL_OPENAI_API_KEY": "none",
    }


@contextmanager
def serve_scripted_model() -> Iterator[tuple[ScriptedModel, str]]:
    """The model and its base URL (http://127.0.0.1:<port>/v1); stopped on exit."""
    model = ScriptedModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            try:
                answer = json.dumps(model.complete(json.loads(self.rfile.read(length)))).encode()
                status = 200
            except Exception as exc:  # the service under test sees a vendor's 500
                answer, status = json.dumps({"error": {"message": repr(exc)}}).encode(), 500
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="scripted-model", daemon=True)
    thread.start()
    try:
        yield model, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
