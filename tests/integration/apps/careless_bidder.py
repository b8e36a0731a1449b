"""An agent app that answers bid solicitations out of contract (app id `careless-bidder`), as a
buggy agent app in any language might: a success probability of "certainly" and a negative
cost. It serves only `POST /v1/bids`, plus the `/healthz` and `/readyz` every Agora app serves;
the test registers its agent with `bid_app_id` naming it."""

from __future__ import annotations

import os

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def bid(_: Request) -> JSONResponse:
    return JSONResponse(
        {"self_reported_success_prob": "certainly", "estimated_cost_usd": -3, "estimated_steps": 0}
    )


async def healthy(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def main() -> None:
    routes = [
        Route("/v1/bids", bid, methods=["POST"]),
        Route("/healthz", healthy),
        Route("/readyz", healthy),
    ]
    uvicorn.run(
        Starlette(routes=routes), host="127.0.0.1", port=int(os.environ["APP_PORT"]), log_level="warning"
    )


if __name__ == "__main__":
    main()
