"""The examples run as written: the crew answers with both members' work, and the review graph
publishes a short note at once (a long one needs the market and a person: the demo runs that)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from agora.sdk import CrewPattern, GraphRunFailed
from agora.sdk.graphs import GraphStatus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{Path(relative).stem}", EXAMPLES / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_crew_example_runs_its_members_in_turn() -> None:
    crew = example("crew.py").crew
    result = await crew.run("Write a note on home solar batteries in Spain")
    assert result.pattern is CrewPattern.SEQUENTIAL and list(result.outputs) == ["researcher", "writer"]
    assert result.final_output == result.outputs["writer"]


async def test_the_review_graph_publishes_a_short_note_at_once_and_sends_a_long_one_to_the_market() -> None:
    review = example("graphs/review.py")
    short = await review.review.run(review.Note(input="wind power"))
    assert short.status is GraphStatus.COMPLETED and short.path == ["measure", "publish"]
    assert short.state.words == 2 and short.state.output == "Note on wind power (2 words). [no review needed]"
    with pytest.raises(GraphRunFailed, match="node 'research' failed"):
        await review.review.run(review.Note(input="home solar batteries in Spain: prices, payback"))
