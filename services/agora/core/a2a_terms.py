"""Agora's A2A extension: what an A2A agent's Agent Card says of its terms on the market.

An A2A agent that wants the market to know its price declares the extension in its card's
`capabilities.extensions`, with `params` that parse as `MarketTerms`:

    {"uri": "urn:agora:a2a:market:v1", "params": {"price_per_step_usd": 0.002, "max_steps": 8}}

The URI names the extension; nothing is ever fetched from it. A card without the extension
takes its terms from its registration (or the defaults), and the market estimates its bids.

With `"bids": true` the agent makes its own bids. The market asks for one with a message that
names the extension in its `extensions` and has one data part, `{"bid_request": <BidSolicitation>}`
(proto/jsonschema/bid_solicitation.json), in a context of its own (`agora-bid-<task>`); the agent
answers with a message (not a task) whose data part is `{"bid_offer": <BidOffer>}`
(proto/jsonschema/bid_offer.json), within the solicitation's `respond_within_ms`. Any other
answer, or none in time, and the market uses its own estimate, marked with the reason.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BID_OFFER_KEY", "BID_REQUEST_KEY", "MARKET_EXTENSION_URI", "MAX_CARD_BYTES", "MarketTerms"]

MARKET_EXTENSION_URI = "urn:agora:a2a:market:v1"
BID_REQUEST_KEY = "bid_request"
BID_OFFER_KEY = "bid_offer"
MAX_CARD_BYTES = 256 * 1024
"""The largest Agent Card read (bytes of its JSON): a card the size of a program is refused."""


class MarketTerms(BaseModel):
    """An A2A agent's terms on the market, from its card's Agora extension (`params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    price_per_step_usd: float = Field(
        default=0.0, ge=0.0, le=1_000.0, description="What the agent charges for a step of its work."
    )
    max_steps: int | None = Field(
        default=None, ge=1, le=10_000, description="The most steps it takes on one task; none: 20."
    )
    bids: bool = Field(
        default=False,
        description="Whether it answers the market's bid requests itself (else the market estimates).",
    )
