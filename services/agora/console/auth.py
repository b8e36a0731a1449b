"""Who is at the console and what they may do: people sign in with a name and secret from a
users file (secrets stored as scrypt hashes) or with one configured token; behind an
authenticating proxy, its user header names them (only when configured to trust it). A signed-in
person holds a session cookie signed with the console's key (HMAC-SHA256, no server state, so
any replica reads it) and a CSRF token derived from it for the forms. A viewer reads; a decider
also decides.

Nothing here writes a secret anywhere: a secret is compared (in constant time) and dropped.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agora.core.limits import MAX_NAME_CHARS

__all__ = [
    "SCRYPT_N",
    "Person",
    "Role",
    "SessionSigner",
    "SignInRefused",
    "SignInThrottle",
    "UserBook",
    "UserEntry",
    "UsersFile",
    "hash_secret",
    "load_users",
    "proxied_person",
    "read_people_file",
    "verify_secret",
]

F = TypeVar("F", bound=BaseModel)

SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
SALT_BYTES = 16
KEY_BYTES = 32
MAX_SECRET_CHARS = 1024
"""A longer secret is refused before it is hashed (hashing is deliberately slow)."""


class Role(StrEnum):
    VIEWER = "viewer"
    """Reads every page; may not decide."""
    DECIDER = "decider"
    """Reads, and decides escalations."""


class Person(BaseModel):
    """Someone at the console: their name (the `who` of their decisions) and role."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    role: Role

    @property
    def may_decide(self) -> bool:
        return self.role is Role.DECIDER


class SignInRefused(Exception):
    """The name and secret do not match a person (the message never says which one failed)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_secret(secret: str, salt: bytes | None = None) -> str:
    """`scrypt$N$r$p$<salt>$<key>` (base64url): what a users file stores instead of a secret."""
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    key = hashlib.scrypt(secret.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=KEY_BYTES)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def verify_secret(secret: str, stored: str) -> bool:
    """Whether `secret` hashes to `stored` (a `hash_secret` value); False for anything
    malformed or over-long, never an exception."""
    if len(secret) > MAX_SECRET_CHARS:
        return False
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = _unb64(key)
        derived = hashlib.scrypt(
            secret.encode(),
            salt=_unb64(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(expected),
            maxmem=256 * 1024 * 1024,
        )
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(derived, expected)


class UserEntry(BaseModel):
    """One person in a users file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"^[^\s]+$")
    role: Role
    secret_hash: str = Field(
        min_length=1, max_length=512, pattern=r"^scrypt\$", description="hash_secret of their secret"
    )


class UsersFile(BaseModel):
    """A users file (YAML): `users: [{name, role, secret_hash}, ...]`."""

    model_config = ConfigDict(extra="forbid")

    users: list[UserEntry] = Field(default_factory=list, max_length=10_000)


@dataclass(frozen=True)
class UserBook:
    """Everyone who may sign in: the users file's people, and the configured token's person."""

    users: Mapping[str, UserEntry]
    token: str | None = None
    token_person: Person | None = None

    @property
    def anyone(self) -> bool:
        return bool(self.users) or self.token is not None

    def sign_in(self, name: str, secret: str) -> Person:
        """The person `name` whose secret this is; or, when the secret is the configured
        token, the token's person (the name then does not matter). Raises SignInRefused."""
        entry = self.users.get(name.strip())
        if entry is not None and verify_secret(secret, entry.secret_hash):
            return Person(name=entry.name, role=entry.role)
        if (
            self.token is not None
            and self.token_person is not None
            and hmac.compare_digest(secret.encode(), self.token.encode())
        ):
            return self.token_person
        raise SignInRefused("that name and secret do not sign anyone in")


def load_users(path: Path | None, token: str | None = None, token_person: Person | None = None) -> UserBook:
    """The user book from a users file (None: no file) and the token. A file that cannot be
    read or does not hold a users list raises ValueError naming the file (not its content)."""
    users: dict[str, UserEntry] = {}
    if path is not None:
        parsed = read_people_file(path, UsersFile, "users")
        users = {entry.name: entry for entry in parsed.users}
    return UserBook(users, token if token else None, token_person if token else None)


def read_people_file(path: Path, model: type[F], what: str) -> F:
    """A YAML file of people (`what`: users, API keys) read as `model`. One that cannot be read
    or does not hold such a list raises ValueError naming the file and the fields, never its
    content (it holds hashes of secrets)."""
    try:
        return model.model_validate(yaml.safe_load(path.read_text()) or {})
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read the {what} file {path}: {type(exc).__name__}") from None
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors()[:5])
        raise ValueError(f"the {what} file {path} does not hold a list of {what} (check {fields})") from None


def proxied_person(headers: Mapping[str, str], header: str | None, deciders: Sequence[str]) -> Person | None:
    """The person an authenticating proxy names in `header` (only when a header is configured):
    a decider when listed in `deciders`, else a viewer. None when not configured or absent."""
    if not header:
        return None
    name = headers.get(header.lower(), "").strip()
    if not name or len(name) > MAX_NAME_CHARS or any(c.isspace() or ord(c) < 32 for c in name):
        return None
    return Person(name=name, role=Role.DECIDER if name in deciders else Role.VIEWER)


@dataclass(frozen=True)
class Session:
    person: Person
    nonce: str
    expires_at: int


class SessionSigner:
    """Session cookies and CSRF tokens, both HMAC-SHA256 under the console's key.

    A cookie is `<payload>.<mac>` (base64url): the person, a random nonce and the expiry; a
    cookie whose MAC does not match, or that expired, is no session. A CSRF token is the MAC of
    the session's nonce, so it changes with every sign-in and cannot be made without the key."""

    def __init__(self, key: bytes, lifetime_seconds: int) -> None:
        if len(key) < 16:
            raise ValueError("the session key must be at least 16 bytes")
        self._key = key
        self._lifetime = lifetime_seconds

    def _mac(self, purpose: str, data: bytes) -> str:
        return _b64(hmac.new(self._key, purpose.encode() + b"|" + data, hashlib.sha256).digest())

    def issue(self, person: Person, now: int) -> tuple[str, Session]:
        session = Session(person, secrets.token_hex(16), now + self._lifetime)
        payload = json.dumps(
            {
                "name": person.name,
                "role": str(person.role),
                "nonce": session.nonce,
                "exp": session.expires_at,
            },
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{self._mac('session', payload)}", session

    def open(self, cookie: str | None, now: int) -> Session | None:
        if not cookie or len(cookie) > 4096 or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        try:
            payload = _unb64(body)
        except (ValueError, binascii.Error):
            return None
        if not hmac.compare_digest(mac, self._mac("session", payload)):
            return None
        try:
            fields = json.loads(payload)
            person = Person(name=fields["name"], role=Role(fields["role"]))
            session = Session(person, str(fields["nonce"]), int(fields["exp"]))
        except (ValueError, KeyError, TypeError, ValidationError):
            return None
        return session if session.expires_at > now else None

    def csrf_token(self, nonce: str) -> str:
        return self._mac("csrf", nonce.encode())

    def csrf_valid(self, nonce: str, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self.csrf_token(nonce).encode())


@dataclass
class SignInThrottle:
    """Slows down guessing: after `attempts` refused sign-ins for one name (or from one
    address) within `window_seconds`, more tries for it are refused unchecked until the oldest
    of them leaves the window. Per process; the names and addresses it keeps are bounded."""

    attempts: int = 5
    window_seconds: float = 300.0
    tracked_at_most: int = 10_000
    _refused: dict[str, deque[float]] = field(default_factory=dict)

    def allows(self, keys: Sequence[str], now: float) -> bool:
        return all(len(self._recent(key, now)) < self.attempts for key in keys)

    def refused(self, keys: Sequence[str], now: float) -> None:
        if len(self._refused) >= self.tracked_at_most:
            self._refused.clear()  # under a flood of names, start over rather than grow
        for key in keys:
            self._refused.setdefault(key, deque(maxlen=self.attempts)).append(now)

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._refused.get(key, deque())
        while times and now - times[0] > self.window_seconds:
            times.popleft()
        return times
