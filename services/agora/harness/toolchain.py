"""Where the runtime binaries live: built once per version into ~/.cache/agora (see the
Makefile's `dapr` and `jaeger` targets), shared by every clone on the machine."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
VERSIONS_FILE = REPO_ROOT / "deploy" / "versions.env"


class MissingTool(RuntimeError):
    pass


def pinned_versions() -> dict[str, str]:
    versions = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


def cache_root() -> Path:
    return Path(os.environ.get("AGORA_CACHE", Path.home() / ".cache" / "agora"))


@dataclass(frozen=True)
class Toolchain:
    dapr_bin: Path
    jaeger_bin: Path
    model_server_env: Path
    """The local model server's own environment (`make model-server`)."""
    toxiproxy_bin: Path

    @classmethod
    def from_environment(cls) -> Toolchain:
        versions = pinned_versions()
        root = cache_root()
        model_server = f"model-server-{versions['XLLAMACPP_VERSION']}-smollm2-{versions['SMOLLM2_VERSION']}"
        return cls(
            dapr_bin=Path(
                os.environ.get(
                    "AGORA_DAPR_BIN",
                    root / f"dapr-{versions['DAPR_VERSION']}-{versions['DAPR_BUILD']}" / "bin",
                )
            ),
            jaeger_bin=Path(
                os.environ.get("AGORA_JAEGER_BIN", root / f"jaeger-{versions['JAEGER_VERSION']}" / "bin")
            ),
            model_server_env=Path(os.environ.get("AGORA_MODEL_SERVER_ENV", root / model_server)),
            toxiproxy_bin=root / f"toxiproxy-{versions['TOXIPROXY_VERSION']}" / "bin",
        )

    def _require(self, path: Path, make_target: str) -> Path:
        if not path.is_file():
            raise MissingTool(f"{path} is missing; build it with `make {make_target}`")
        return path

    @property
    def daprd(self) -> Path:
        return self._require(self.dapr_bin / "daprd", "dapr")

    @property
    def placement(self) -> Path:
        return self._require(self.dapr_bin / "placement", "dapr")

    @property
    def scheduler(self) -> Path:
        return self._require(self.dapr_bin / "scheduler", "dapr")

    @property
    def sentry(self) -> Path:
        return self._require(self.dapr_bin / "sentry", "dapr")

    @property
    def jaeger(self) -> Path:
        return self._require(self.jaeger_bin / "jaeger", "jaeger")

    @property
    def model_server_python(self) -> Path:
        self._require(self.model_server_env / ".installed", "model-server")
        return self.model_server_env / "bin" / "python"

    @property
    def toxiproxy_server(self) -> Path:
        return self._require(self.toxiproxy_bin / "toxiproxy-server", "toxiproxy")

    @property
    def redis_server(self) -> Path:
        found = shutil.which("redis-server") or "/usr/bin/redis-server"
        return self._require(Path(found), "redis")

    @property
    def postgres_bin(self) -> Path:
        """Debian's PostgreSQL server programs (`initdb`, `postgres`), of the newest version
        installed."""
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
        return self._require(
            found[-1] if found else Path("/usr/lib/postgresql/bin/postgres"), "postgres"
        ).parent

    @property
    def rabbitmq_server(self) -> Path:
        return self._require(Path("/usr/lib/rabbitmq/bin/rabbitmq-server"), "postgres")

    @property
    def epmd(self) -> Path:
        """Erlang's port mapper, which a RabbitMQ node registers with."""
        return self._require(Path(shutil.which("epmd") or "/usr/bin/epmd"), "postgres")
