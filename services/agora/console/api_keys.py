"""API keys: how a program (an assistant speaking MCP, a script) acts as a person at the console.
A key is a long random secret sent as `Authorization: Bearer <key>`; the keys file holds each
key's SHA-256 (a key has 256 bits of entropy, so a fast hash is enough, unlike a person's
secret), with the name and role of the person it acts as. The console's configured token acts
as its token person, as it does at sign-in.

`python -m agora.console.api_keys NAME ROLE` makes a key: its keys-file entry on standard output,
the key itself on standard error (shown once, stored nowhere)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agora.console.auth import Person, Role, read_people_file
from agora.console.users import write_private
from agora.core.limits import MAX_NAME_CHARS

__all__ = [
    "KEY_PREFIX",
    "ApiKeyEntry",
    "ApiKeys",
    "ApiKeysFile",
    "load_api_keys",
    "local_api_key",
    "new_api_key",
]

KEY_PREFIX = "agora_"
MIN_KEY_CHARS = 32
MAX_KEY_CHARS = 256
"""A presented key outside these bounds is refused before it is hashed."""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeyEntry(BaseModel):
    """One key in the keys file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"^[^\s]+$")
    role: Role
    key_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the key")


class ApiKeysFile(BaseModel):
    """A keys file (YAML): `keys: [{name, role, key_sha256}, ...]`."""

    model_config = ConfigDict(extra="forbid")

    keys: list[ApiKeyEntry] = Field(default_factory=list, max_length=10_000)


@dataclass(frozen=True)
class ApiKeys:
    """Who each key acts as: the keys file's entries by digest, and the console's token."""

    by_digest: Mapping[str, Person]
    token: str | None = None
    token_person: Person | None = None

    def person_of(self, key: str) -> Person | None:
        """The person a presented key acts as; None for an unknown key."""
        if not MIN_KEY_CHARS <= len(key) <= MAX_KEY_CHARS and key != self.token:
            return None
        person = self.by_digest.get(_digest(key))
        if person is not None:
            return person
        if self.token is not None and hmac.compare_digest(key.encode(), self.token.encode()):
            return self.token_person
        return None


def load_api_keys(path: Path | None, token: str | None = None, token_person: Person | None = None) -> ApiKeys:
    """The keys from a keys file (None: no file) and the console's token. A file that cannot be
    read or does not hold a keys list raises ValueError naming the file (not its content)."""
    by_digest: dict[str, Person] = {}
    if path is not None:
        parsed = read_people_file(path, ApiKeysFile, "API keys")
        by_digest = {entry.key_sha256: Person(name=entry.name, role=entry.role) for entry in parsed.keys}
    return ApiKeys(by_digest, token or None, token_person if token else None)


def new_api_key(name: str, role: Role) -> tuple[str, ApiKeyEntry]:
    """A fresh key and its keys-file entry."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, ApiKeyEntry(name=name, role=role, key_sha256=_digest(key))


def local_api_key(folder: Path, name: str) -> tuple[Path, Path]:
    """A keys file with one decider's key, and the key in a file only this user can read (for
    `make run`: the key is shown by its file's path, never on the terminal or in a log).
    Returns (keys file, key file)."""
    folder.mkdir(parents=True, exist_ok=True)
    key, entry = new_api_key(name, Role.DECIDER)
    keys, key_file = folder / "api-keys.yaml", folder / f"{name}-api-key"
    write_private(keys, yaml.safe_dump({"keys": [entry.model_dump(mode="json")]}, sort_keys=False))
    write_private(key_file, key + "\n")
    return keys, key_file


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[1] not in {str(r) for r in Role}:
        print("usage: python -m agora.console.api_keys NAME viewer|decider", file=sys.stderr)
        return 2
    try:
        key, entry = new_api_key(args[0], Role(args[1]))
    except ValidationError:
        print(f"the name must be one word of at most {MAX_NAME_CHARS} characters", file=sys.stderr)
        return 2
    print(yaml.safe_dump([entry.model_dump(mode="json")], sort_keys=False), end="")
    print(f"the key (shown once): {key}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
