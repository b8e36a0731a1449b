"""API keys at the console: a key acts as its entry's person, found by the key's SHA-256; the
console token acts as its person; an unknown, empty or oversized key acts as nobody; a keys file
that is not a keys list is refused naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agora.console.api_keys import KEY_PREFIX, MAX_KEY_CHARS, ApiKeyEntry, load_api_keys, main, new_api_key
from agora.console.auth import Person, Role


def keys_file(tmp_path: Path, *entries: ApiKeyEntry) -> Path:
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump({"keys": [e.model_dump(mode="json") for e in entries]}))
    return path


def test_a_key_acts_as_its_person_with_their_role(tmp_path: Path) -> None:
    alice_key, alice = new_api_key("alice", Role.DECIDER)
    victor_key, victor = new_api_key("victor", Role.VIEWER)
    keys = load_api_keys(keys_file(tmp_path, alice, victor))
    assert alice_key.startswith(KEY_PREFIX) and alice_key not in (tmp_path / "keys.yaml").read_text()
    assert keys.person_of(alice_key) == Person(name="alice", role=Role.DECIDER)
    assert keys.person_of(victor_key) == Person(name="victor", role=Role.VIEWER)


def test_unknown_empty_and_oversized_keys_act_as_nobody(tmp_path: Path) -> None:
    alice_key, alice = new_api_key("alice", Role.DECIDER)
    keys = load_api_keys(keys_file(tmp_path, alice))
    for key in ("", alice_key[:-1], alice_key + "x", "x" * (MAX_KEY_CHARS + 1)):
        assert keys.person_of(key) is None, key


def test_the_console_token_acts_as_its_person() -> None:
    person = Person(name="operator", role=Role.DECIDER)
    keys = load_api_keys(None, "short-token", person)
    assert keys.person_of("short-token") == person
    assert keys.person_of("short-tokeN") is None
    assert load_api_keys(None, None, person).person_of("short-token") is None


@pytest.mark.parametrize(
    "content", ["keys: [{name: alice, role: decider, key_sha256: nothex}]", "keys: {a: 1}", ": : :"]
)
def test_a_keys_file_that_is_not_a_keys_list_is_refused_naming_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"keys\.yaml") as refused:
        load_api_keys(path)
    assert "nothex" not in str(refused.value)


def test_the_command_prints_the_entry_and_shows_the_key_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["alice", "decider"]) == 0
    out, err = capsys.readouterr()
    key = err.strip().rsplit(" ", 1)[-1]
    path = tmp_path / "keys.yaml"
    path.write_text("keys:\n" + out)
    assert load_api_keys(path).person_of(key) == Person(name="alice", role=Role.DECIDER)
    assert main(["alice", "admin"]) == 2
