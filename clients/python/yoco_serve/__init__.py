"""A Python client for YOCO Serve's gRPC API (yoco.v1.Yoco): pre-cache documents, ask questions
against them with streaming, list and evict cached snapshots."""

from yoco_serve.client import (
    Answer,
    CacheEntry,
    CachedDocument,
    Scored,
    Token,
    TokenLogprob,
    YocoClient,
    YocoError,
)

__all__ = [
    "Answer",
    "CacheEntry",
    "CachedDocument",
    "Scored",
    "Token",
    "TokenLogprob",
    "YocoClient",
    "YocoError",
]
