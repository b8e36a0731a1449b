"""Topic recorder: a tiny app that subscribes to chosen topics and serves what it received.

Used by the tests and `make run` to watch topics such as the dead-letter topic. Topics come
from AGORA_RECORD_TOPICS as `pubsub/topic` pairs separated by commas.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

from fastapi import FastAPI, Query
from pydantic import BaseModel

from agora.core.limits import MAX_JSON_DEPTH, json_depth
from agora.runtime.service import ServiceContext, ServiceModule, create_service_app, serve
from agora.runtime.settings import ServiceSettings

APP_ID = "recorder"


class RecorderSettings(ServiceSettings):
    app_id: str = APP_ID
    record_topics: str = "agora-pubsub/agora.deadletter"


class Recorded(BaseModel):
    topic: str
    messages: list[Any]


class Arrival(BaseModel):
    received_at: float
    """Wall-clock seconds (time.time()) when the delivery reached the recorder."""
    payload: Any


class Arrivals(BaseModel):
    topic: str
    arrivals: list[Arrival]


def create_app(settings: RecorderSettings | None = None) -> FastAPI:
    settings = settings or RecorderSettings()
    received: dict[str, list[Arrival]] = defaultdict(list)

    def setup(ctx: ServiceContext, app: FastAPI) -> None:
        for pair in filter(None, (p.strip() for p in settings.record_topics.split(","))):
            pubsub, topic = pair.split("/", 1)

            async def record(payload: Any, topic: str = topic) -> None:
                if json_depth(payload) > MAX_JSON_DEPTH:  # kept as its text, as a dead letter keeps it
                    payload = json.dumps(payload)
                received[topic].append(Arrival(received_at=time.time(), payload=payload))

            # The recorder must see malformed payloads too, so it accepts anything and never
            # dead-letters what it records. Recording a delivery twice changes nothing anyone
            # relies on, so no shared dedupe marker is kept (it would double its cost).
            ctx.subscriptions.subscribe_any(topic, record, pubsub=pubsub, dead_letter=False, idempotent=True)

        @app.get("/v1/messages/{topic}", response_model=Recorded)
        async def messages(topic: str) -> Recorded:
            return Recorded(topic=topic, messages=[a.payload for a in received.get(topic, [])])

        @app.get("/v1/arrivals/{topic}", response_model=Arrivals)
        async def arrivals(topic: str, after: int = Query(default=0, ge=0)) -> Arrivals:
            """What arrived on `topic`, from the `after`-th arrival on (a watcher that polls
            asks only for what is new)."""
            return Arrivals(topic=topic, arrivals=received.get(topic, [])[after:])

    return create_service_app(settings, [ServiceModule("recorder", setup=setup)])


def main() -> None:
    settings = RecorderSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
