from agora.core.schemas import SCHEMA_DIR, render


def test_committed_json_schemas_match_the_models() -> None:
    for filename, text in render().items():
        path = SCHEMA_DIR / filename
        assert path.is_file(), f"{path} missing: run python -m agora.core.schemas"
        assert path.read_text() == text, f"{path} is stale: run python -m agora.core.schemas"
