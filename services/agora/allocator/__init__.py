"""Allocator service: market allocation (filter → solicit bids → score → award, or reject)."""
