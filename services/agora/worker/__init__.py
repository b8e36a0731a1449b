"""Reference worker: executes awarded tasks for its agents and reports outcomes."""

__all__: list[str] = []
