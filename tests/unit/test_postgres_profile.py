"""The postgres profile's components (components/postgres/): the same component names, scopes
and topic scopes as the redis profile, on PostgreSQL and RabbitMQ, with what keeps a message
and a write from being lost there (durable queues, persistent messages, publisher confirms, a
failed delivery requeued) and every credential from the secret store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

COMPONENTS = Path(__file__).resolve().parents[2] / "components"


def components(profile: str) -> dict[str, dict[str, Any]]:
    docs = [
        d
        for path in sorted((COMPONENTS / profile).glob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]
    return {doc["metadata"]["name"]: doc for doc in docs}


def metadata(component: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item for item in component["spec"]["metadata"]}


def test_the_postgres_profile_has_the_redis_profile_s_components_scopes_and_topic_scopes() -> None:
    postgres, redis = components("postgres"), components("redis")
    assert set(postgres) == set(redis)
    for name, component in postgres.items():
        assert component.get("scopes") == redis[name].get("scopes"), name
        ours, theirs = metadata(component), metadata(redis[name])
        for rule in ("protectedTopics", "publishingScopes", "subscriptionScopes"):
            assert ours.get(rule) == theirs.get(rule), (name, rule)


def test_its_store_keeps_actors_and_its_broker_loses_no_message_it_confirmed() -> None:
    found = components("postgres")
    state = metadata(found["agora-state"])
    assert found["agora-state"]["spec"]["type"] == "state.postgresql"
    assert state["actorStateStore"]["value"] == "true"
    work, fan = metadata(found["agora-pubsub"]), metadata(found["agora-broadcast"])
    types = {found[name]["spec"]["type"] for name in ("agora-pubsub", "agora-broadcast")}
    assert types == {"pubsub.agora.rabbitmq"}
    assert {k: work[k]["value"] for k in ("durable", "deletedWhenUnused", "deliveryMode", "publisherConfirm",
                                          "requeueInFailure")} == {
        "durable": "true", "deletedWhenUnused": "false", "deliveryMode": "2", "publisherConfirm": "true",
        "requeueInFailure": "true",
    }  # fmt: skip
    assert "consumerID" not in work, "replicas of an app share its queues"
    assert fan["consumerID"]["value"] == "{uuid}" and fan["deletedWhenUnused"]["value"] == "true"
    for component in found.values():
        if component["spec"]["type"].startswith(("state.", "pubsub.")):
            [secret] = [m for m in component["spec"]["metadata"] if "secretKeyRef" in m]
            assert secret["name"] == "connectionString" and component["auth"] == {
                "secretStore": "agora-secrets"
            }
