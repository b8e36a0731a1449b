"""Reference worker: executes awarded tasks for its agents and reports outcomes."""
