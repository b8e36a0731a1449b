"""`python -m agora.console.users NAME ROLE`: one users-file entry for NAME with ROLE (viewer or
decider), its secret read from standard input (never from the command line, where other users
of the machine could see it), stored as a scrypt hash. Append the printed lines to the users
file under `users:`."""

from __future__ import annotations

import getpass
import os
import secrets
import sys
from pathlib import Path

import yaml

from agora.console.auth import Role, UserEntry, hash_secret

__all__ = ["LOCAL_PERSON", "entry_yaml", "local_sign_in", "main", "write_private"]

LOCAL_PERSON = "operator"


def entry_yaml(name: str, role: Role, secret: str) -> str:
    entry = UserEntry(name=name, role=role, secret_hash=hash_secret(secret))
    return yaml.safe_dump([entry.model_dump(mode="json")], sort_keys=False)


def write_private(path: Path, text: str) -> None:
    """Write `text` to a new file only its owner can read."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


def local_sign_in(folder: Path) -> tuple[Path, Path]:
    """A users file with one decider, `operator`, and a fresh random secret for them, each in
    a file only this user can read (for `make run`: the secret is shown by its file's path,
    never on the terminal or in a log). Returns (users file, secret file)."""
    folder.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(24)
    users, secret_file = folder / "users.yaml", folder / "operator-secret"
    write_private(users, "users:\n" + entry_yaml(LOCAL_PERSON, Role.DECIDER, secret))
    write_private(secret_file, secret + "\n")
    return users, secret_file


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[1] not in {str(r) for r in Role}:
        print("usage: python -m agora.console.users NAME viewer|decider  (the secret is read from stdin)")
        return 2
    secret = getpass.getpass("secret: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if len(secret) < 12:
        print("the secret must have at least 12 characters", file=sys.stderr)
        return 2
    print(entry_yaml(args[0], Role(args[1]), secret), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
