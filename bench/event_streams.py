"""1,000 watchers of one busy task's event stream, beside a bare SSE server in the same run.

  agora  the task board's event streams (`taskboard/event_streams.py`): one feed polls the
         task's record (every 0.5 s, the default) and derives its events; each watcher has
         its bounded buffer; served by uvicorn as the board serves them;
  bare   the least an SSE server can do for the same clients: one broadcaster hands the same
         events, rendered once, at the same moments, to one unbounded queue per client, and
         each is written on its own;
  bare-batched  the same at the board's cadence: every 0.5 s, the events of that half second
         written together (as the board writes what waits for a watcher after each poll).

The busy task: 200 bidders, the award passing from one to the next every 20 ms (an award made
and one lapsed each time: 100 events a second) for 4 s, then the outcome. Both servers read the
same timeline. Each server runs alone in its own process; the watchers are one asyncio process
of raw sockets (so the client costs little beside the servers), all connected before the task
starts. Reported per server: events delivered, server CPU seconds and microseconds per
delivered event, and its memory before and with the watchers connected (RSS, per watcher).

    python -m bench.event_streams
    AGORA_BENCH_WATCHERS=200 python -m bench.event_streams
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

WATCHERS = int(os.environ.get("AGORA_BENCH_WATCHERS", "1000"))
BIDDERS = 200
HANDOVER_S = 0.02
RESULTS = Path(
    os.environ.get("AGORA_BENCH_RESULTS", Path(__file__).parent / "results" / "event_streams.json")
)
START_DELAY_S = 3.0
"""After the servers start: time for every watcher to connect before the task's first change."""


def timeline(started: datetime) -> list[Any]:
    """The task's record after each change: allocated to the best of `BIDDERS` bids, each award
    lapsing to the next every `HANDOVER_S`, the last one's outcome recorded."""
    from agora.core.market import AllocationResult, AllocationStatus, Bid, BidScore, TaskOutcome, TaskSpec
    from agora.core.task_lifecycle import (
        TaskRecord,
        acknowledge,
        allocate,
        expire_award,
        move,
        record_outcome,
    )

    spec = TaskSpec(task_id="busy", description="a task many agents bid for", required_skills=["s"])
    pairs = []
    for n in range(BIDDERS):
        agent = f"agent-{n:03d}"
        bid = Bid(
            task_id="busy",
            agent_id=agent,
            self_reported_success_prob=0.8,
            estimated_cost_usd=0.1,
            estimated_steps=2,
        )
        final = 1.0 - n / 1000
        score = BidScore(
            bid_id=bid.bid_id,
            agent_id=agent,
            raw_success_prob=0.8,
            calibrated_success_prob=0.8,
            reputation_score=0.5,
            cost_score=0.5,
            composite=final,
            ucb_bonus=0.0,
            final_score=final,
        )
        pairs.append((bid, score))
    result = AllocationResult(
        task_id="busy",
        status=AllocationStatus.ALLOCATED,
        winning_agent_id=pairs[0][0].agent_id,
        winning_bid=pairs[0][0],
        winning_score=pairs[0][1],
        all_scores=[s for _, s in pairs],
        all_bids=[b for b, _ in pairs],
    )
    record = move(TaskRecord(spec=spec), AllocationStatus.BIDDING)
    records = [record]
    record = allocate(record, result, started)
    records.append(record)
    for n in range(1, BIDDERS):
        record = expire_award(record, started + timedelta(seconds=n * HANDOVER_S))
        records.append(record)
    last = record.awards[-1].agent_id
    record = acknowledge(record, last, started + timedelta(seconds=BIDDERS * HANDOVER_S))
    outcome = TaskOutcome(
        task_id="busy", agent_id=last, actual_success=True, actual_cost_usd=0.1, actual_steps=2
    )
    records.append(record_outcome(record, outcome, started + timedelta(seconds=BIDDERS * HANDOVER_S)))
    return records


def serve(kind: str, port: int, start_at: float) -> None:
    """One server (`agora` or `bare`) on `port`; the task's timeline begins at `start_at`
    (time.time())."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from agora.core.task_events import task_events
    from agora.runtime.event_streams import DEFAULT_POLL_SECONDS, last_seen, sse
    from agora.taskboard.event_streams import TaskEventStreams

    records = timeline(datetime.now(UTC))

    def stage_now() -> int:
        elapsed = time.time() - start_at
        return 0 if elapsed < 0 else min(len(records) - 1, 1 + int(elapsed / HANDOVER_S))

    if kind == "agora":

        async def read(task_id: str) -> Any:
            return records[stage_now()]

        streams = TaskEventStreams(read)

        async def events(request: Request) -> StreamingResponse:
            record = await read("busy")
            body = streams.stream(record.task_id, record, last_seen(request.headers.get("last-event-id")))
            return StreamingResponse(body, media_type="text/event-stream")

    else:
        # Every event rendered once, and how many there are at each stage of the timeline.
        texts = [sse(e.kind, e.model_dump_json(), e.seq) for e in task_events(records[-1])]
        known = [len(task_events(record)) for record in records]
        queues: set[asyncio.Queue[str | None]] = set()
        batched = kind == "bare-batched"

        async def broadcast() -> None:
            sent = known[0]  # a client connecting before the start gets these itself
            while True:
                await asyncio.sleep(DEFAULT_POLL_SECONDS if batched else 0.005)
                stage = stage_now()
                fresh = texts[sent : known[stage]]
                sent = known[stage]
                chunks = ["".join(fresh)] if batched and fresh else fresh
                done = stage == len(records) - 1
                for queue in queues:
                    for chunk in chunks:
                        queue.put_nowait(chunk)
                    if done:
                        queue.put_nowait(None)
                if done:
                    return

        async def body(queue: asyncio.Queue[str | None]) -> Any:
            yield "".join(texts[: known[stage_now()]])
            while (chunk := await queue.get()) is not None:
                yield chunk
            yield sse("end", "{}")

        async def events(request: Request) -> StreamingResponse:
            queue: asyncio.Queue[str | None] = asyncio.Queue()
            queues.add(queue)
            return StreamingResponse(body(queue), media_type="text/event-stream")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        broadcaster = asyncio.create_task(broadcast()) if kind != "agora" else None
        yield
        if broadcaster is not None:
            broadcaster.cancel()

    app = Starlette(routes=[Route("/events", events)], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


async def watch_all(port: int, watchers: int) -> dict[str, Any]:
    """`watchers` raw-socket clients of the stream, all until its end: events each received."""

    async def one() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /events HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n")
        await writer.drain()
        received, tail = 0, b""
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            data = tail + chunk
            received += data.count(b"\nid: ") + data.startswith(b"id: ")
            tail = data[-8:]
            if b"event: end" in data:
                break
        writer.close()
        return received

    counts = await asyncio.gather(*(one() for _ in range(watchers)))
    return {
        "watchers": watchers,
        "events_each_min": min(counts),
        "events_each_max": max(counts),
        "delivered": sum(counts),
    }


def _cpu_and_rss(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    return cpu, rss


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def measure(kind: str) -> dict[str, Any]:
    port = _free_port()
    start_at = time.time() + START_DELAY_S + 2
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.event_streams", "serve", kind, str(port), str(start_at)]
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        cpu_before, rss_before = _cpu_and_rss(server.pid)
        peak = {"rss": rss_before}

        async def run() -> dict[str, Any]:
            watching = asyncio.create_task(watch_all(port, WATCHERS))
            while not watching.done():
                await asyncio.sleep(0.2)
                peak["rss"] = max(peak["rss"], _cpu_and_rss(server.pid)[1])
            return await watching

        received = asyncio.run(run())
        cpu_after, _ = _cpu_and_rss(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=10)
    cpu = cpu_after - cpu_before
    delivered = max(1, received["delivered"])
    return {
        **received,
        "server_cpu_s": round(cpu, 2),
        "server_cpu_us_per_delivered_event": round(cpu / delivered * 1e6, 1),
        "server_rss_mb_before": round(rss_before / 1024, 1),
        "server_rss_mb_with_watchers": round(peak["rss"] / 1024, 1),
        "server_kb_per_watcher": round((peak["rss"] - rss_before) / WATCHERS, 1),
    }


def main() -> None:
    events = len(timeline(datetime.now(UTC))) * 2 + 1  # statuses, awards, lapses, outcome: about
    result: dict[str, Any] = {
        "benchmark": f"{WATCHERS} watchers of one busy task's event stream (the award passing among "
        f"{BIDDERS} bidders, one hand-over every {HANDOVER_S * 1000:.0f} ms), beside a bare SSE server",
        "events_in_the_stream_about": events,
        "bare": measure("bare"),
        "bare_batched": measure("bare-batched"),
        "agora": measure("agora"),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    for kind in ("agora", "bare", "bare_batched"):
        r = result[kind]
        print(
            f"{kind:>12}: {r['delivered']} events delivered "
            f"({r['events_each_min']}-{r['events_each_max']} each), "
            f"{r['server_cpu_s']} s CPU, {r['server_cpu_us_per_delivered_event']} us/event, "
            f"RSS {r['server_rss_mb_before']} -> {r['server_rss_mb_with_watchers']} MB "
            f"({r['server_kb_per_watcher']} KB/watcher)"
        )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        main()
