"""The graph the graph benchmark runs (served by an agent app): ten nodes in a chain, each
adding one line to the output; the same nodes the benchmark also calls in its own process."""

from __future__ import annotations

from agora.sdk import Graph, GraphState

NODES = 10


def step(number: int):  # type: ignore[no-untyped-def]
    async def node(state: GraphState) -> GraphState:
        return state.model_copy(update={"output": f"{state.output}step {number}\n"})

    return node


def chain() -> Graph[GraphState]:
    graph = Graph("ten", GraphState)
    for number in range(NODES):
        graph.add_node(f"n{number}", step(number), entry=number == 0)
        if number:
            graph.add_edge(f"n{number - 1}", f"n{number}")
    return graph


graphs = [chain().compile()]
