"""YocoClient: the router's gRPC API with types, deadlines, credentials and retries.

The stubs (yoco.v1.yoco_pb2, yoco_pb2_grpc) are generated from proto/ at build time
(build/clients/python); put that folder and this one on PYTHONPATH. Works with Debian's
python3-grpcio and python3-protobuf.

Retries: a call refused with UNAVAILABLE (no healthy worker, a router restarting) is tried again
after a short backoff, up to `retries` times; a Generate stream only until its first token, since
after that the router itself moves the stream to another worker pair.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from yoco.v1 import yoco_pb2, yoco_pb2_grpc


class YocoError(Exception):
    """A call the router refused or that failed: the gRPC status code and its message."""

    def __init__(self, code: grpc.StatusCode, message: str, request_id: str = ""):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


@dataclasses.dataclass(frozen=True)
class CachedDocument:
    handle: str  # the snapshot's key; evict() takes it
    tokens: int  # the document's tokens
    cached_tokens: int  # tokens the snapshot covers (the last 128-token block boundary)
    bytes: int
    worker: str
    disk_error: str = ""  # why the snapshot is held in memory only, if it is


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    handle: str
    tokens: int
    bytes: int
    tier: str
    pinned: bool
    hits: int
    worker: str


@dataclasses.dataclass(frozen=True)
class TokenLogprob:
    id: int
    token: bytes  # the token's own bytes (part of a UTF-8 character, or none for a special id)
    logprob: float  # natural log, of the model's distribution (before temperature, top-k/p)


@dataclasses.dataclass(frozen=True)
class Token:
    id: int
    text: str  # the text this token completes (empty in the middle of a UTF-8 character)
    index: int
    logprob: Optional[float] = None  # with ask(..., logprobs=N)
    top_logprobs: Tuple[TokenLogprob, ...] = ()  # the N most likely, most likely first
    choice: int = 0  # which of ask_n's answers it belongs to


@dataclasses.dataclass(frozen=True)
class Answer:
    text: str
    token_ids: List[int]
    finish_reason: str  # "stop", "length", "eos"
    prompt_tokens: int
    cached_prompt_tokens: int  # prompt tokens restored from a snapshot, not prefilled
    generated_tokens: int
    ttft_ms: float
    request_id: str
    tokens: Tuple[Token, ...] = ()
    # The answer's log-probability (the sum of its tokens'), with ask(..., logprobs=N).
    logprob: Optional[float] = None


def _token(t: yoco_pb2.GeneratedToken) -> Token:
    if not t.HasField("logprob"):
        return Token(t.id, t.text, t.index, choice=t.choice)
    top = tuple(TokenLogprob(a.id, a.token, a.logprob) for a in t.top_logprobs)
    return Token(t.id, t.text, t.index, t.logprob.logprob, top, t.choice)


@dataclasses.dataclass(frozen=True)
class Scored:
    tokens: Tuple[Token, ...]  # the prompt's, each with its logprob (the first: None)
    total_logprob: float  # their sum


_FINISH = {
    yoco_pb2.FINISH_REASON_STOP: "stop",
    yoco_pb2.FINISH_REASON_LENGTH: "length",
    yoco_pb2.FINISH_REASON_EOS: "eos",
}


class YocoClient:
    """One channel to a router. Thread-safe (gRPC channels are); a context manager."""

    def __init__(
        self,
        target: str,
        *,
        token: Optional[str] = None,
        tls_ca: Optional[Union[str, Path]] = None,
        tls_cert: Optional[Union[str, Path]] = None,
        tls_key: Optional[Union[str, Path]] = None,
        timeout: float = 120.0,
        retries: int = 3,
        retry_backoff: float = 0.2,
    ):
        """`target`: HOST:PORT of the router. `token`: a tenant's bearer token (send it over TLS
        only). `tls_ca`: PEM file of the CA that signed the router's certificate (TLS on);
        `tls_cert`/`tls_key`: the client certificate for mutual TLS. `timeout`: each call's
        deadline in seconds."""
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=Path(tls_ca).read_bytes(),
                private_key=Path(tls_key).read_bytes() if tls_key else None,
                certificate_chain=Path(tls_cert).read_bytes() if tls_cert else None,
            )
            self._channel = grpc.secure_channel(target, credentials)
        else:
            if tls_cert or tls_key:
                raise ValueError("tls_cert and tls_key need tls_ca")
            self._channel = grpc.insecure_channel(target)
        self._stub = yoco_pb2_grpc.YocoStub(self._channel)
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._timeout = timeout
        self._retries = retries
        self._backoff = retry_backoff

    def __enter__(self) -> "YocoClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    # --- the prefix cache ---

    def precache(
        self,
        text: Optional[str] = None,
        *,
        tokens: Optional[Sequence[int]] = None,
        pin: bool = False,
        ttl_seconds: int = 0,
    ) -> CachedDocument:
        """Prefills a document (text, or token ids starting with BOS) and keeps its snapshot, so
        prompts that start with it prefill only what follows."""
        request = yoco_pb2.PrecacheRequest(pin=pin, ttl_seconds=ttl_seconds)
        if (text is None) == (tokens is None):
            raise ValueError("give the document as text or as tokens")
        if text is not None:
            request.text = text
        else:
            request.tokens.ids.extend(tokens)
        r = self._unary(self._stub.Precache, request)
        return CachedDocument(r.handle, r.tokens, r.cached_tokens, r.bytes, r.worker, r.disk_error)

    def precache_file(self, path: Union[str, Path], **kwargs) -> CachedDocument:
        """precache() of a UTF-8 text file."""
        return self.precache(Path(path).read_text(encoding="utf-8"), **kwargs)

    def list_cache(self) -> List[CacheEntry]:
        r = self._unary(self._stub.ListCache, yoco_pb2.ListCacheRequest())
        return [
            CacheEntry(e.handle, e.tokens, e.bytes, e.tier, e.pinned, e.hits, e.worker)
            for e in r.entries
        ]

    def evict(self, handle: Optional[str] = None, *, everything: bool = False) -> int:
        """Evicts one snapshot by handle, or (everything=True) all of them, pinned ones too.
        Returns how many were evicted."""
        if (handle is None) == (not everything):
            raise ValueError("give a handle or everything=True")
        request = (
            yoco_pb2.EvictCacheRequest(handle=handle)
            if handle is not None
            else yoco_pb2.EvictCacheRequest(all=True)
        )
        return self._unary(self._stub.EvictCache, request).evicted

    # --- generation ---

    def ask(
        self,
        prompt: Union[str, Sequence[int]],
        *,
        on_token: Optional[Callable[[Token], None]] = None,
        **sampling,
    ) -> Answer:
        """Generates an answer to `prompt` (text, or token ids starting with BOS), calling
        `on_token` with each token as it streams. A prompt that starts with a pre-cached
        document reuses its snapshot (Answer.cached_prompt_tokens says how much). `sampling`:
        max_new_tokens (64), temperature (0: greedy), top_k, top_p, seed, stop (strings),
        stop_at_eos (True), logprobs (None; N in [0, 20]: each token's logprob and the N most
        likely tokens'), presence_penalty, frequency_penalty, repetition_penalty, min_p,
        min_tokens, logit_bias ({token id: bias}), json_schema (a JSON Schema, dict or text: the
        answer is one JSON value it accepts), json_object (any JSON object) or regex (a regular
        expression the whole answer matches), request_id."""
        return self._answers(prompt, 1, on_token, sampling)[0]

    def ask_n(
        self,
        prompt: Union[str, Sequence[int]],
        n: int,
        *,
        on_token: Optional[Callable[[Token], None]] = None,
        **sampling,
    ) -> List[Answer]:
        """n answers to `prompt` from one prefill (1 <= n <= 16), as ask() takes the sampling:
        answer i draws as ask() with seed derived from `seed` would (answer 0: `seed` itself),
        so the whole list is reproducible. Tokens stream interleaved (Token.choice says whose).
        With logprobs=0, Answer.logprob ranks them (best-of-n, self-consistency)."""
        return self._answers(prompt, n, on_token, sampling)

    def _answers(self, prompt, n: int, on_token, sampling) -> List[Answer]:
        tokens: List[List[Token]] = [[] for _ in range(n)]
        finish = None
        request = self._generate_request(prompt, **sampling)
        request.sampling.n = n
        call = None
        for event, call in self._events(request):
            if event.HasField("token"):
                t = _token(event.token)
                if t.choice >= n:
                    raise YocoError(grpc.StatusCode.INTERNAL, f"a token of choice {t.choice}")
                tokens[t.choice].append(t)
                if on_token is not None:
                    on_token(t)
            elif event.HasField("finish"):
                finish = event.finish
        if finish is None:
            raise YocoError(grpc.StatusCode.INTERNAL, "the stream ended without a finish")
        trailers = dict(call.trailing_metadata() or ()) if call is not None else {}
        answers = []
        for i, own in enumerate(tokens):
            logprobs = [t.logprob for t in own]
            reason = finish.choices[i].reason if n > 1 else finish.reason
            answers.append(Answer(
                text="".join(t.text for t in own),
                token_ids=[t.id for t in own],
                finish_reason=_FINISH.get(reason, "unknown"),
                prompt_tokens=finish.usage.prompt_tokens,
                cached_prompt_tokens=finish.usage.cached_prompt_tokens,
                generated_tokens=len(own) if n > 1 else finish.usage.generated_tokens,
                ttft_ms=finish.timings.ttft_ms,
                request_id=trailers.get("x-request-id", request.request_id),
                tokens=tuple(own),
                logprob=sum(logprobs) if logprobs and None not in logprobs else None,
            ))
        return answers

    def stream(self, prompt: Union[str, Sequence[int]], **sampling) -> Iterator[Token]:
        """The answer's tokens as they arrive (ask() also returns the usage)."""
        for event, _ in self._events(self._generate_request(prompt, **sampling)):
            if event.HasField("token"):
                yield _token(event.token)

    @staticmethod
    def _generate_request(
        prompt: Union[str, Sequence[int]],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Sequence[str] = (),
        stop_at_eos: bool = True,
        logprobs: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repetition_penalty: float = 1.0,
        min_p: float = 0.0,
        min_tokens: int = 0,
        logit_bias: Optional[Dict[int, float]] = None,
        json_schema: Optional[Union[dict, str]] = None,
        json_object: bool = False,
        regex: Optional[str] = None,
        request_id: str = "",
    ) -> yoco_pb2.GenerateRequest:
        request = yoco_pb2.GenerateRequest(request_id=request_id)
        if isinstance(prompt, str):
            request.text = prompt
        else:
            request.tokens.ids.extend(prompt)
        s = request.sampling
        s.max_new_tokens = max_new_tokens
        s.temperature = temperature
        s.top_k = top_k
        s.top_p = top_p
        s.seed = seed
        s.stop_strings.extend(stop)
        s.stop_at_eos = stop_at_eos
        if logprobs is not None:
            s.logprobs = logprobs
        s.presence_penalty = presence_penalty
        s.frequency_penalty = frequency_penalty
        s.repetition_penalty = repetition_penalty
        s.min_p = min_p
        s.min_tokens = min_tokens
        for token, bias in (logit_bias or {}).items():
            s.logit_bias[token] = bias
        if json_schema is not None:
            s.response_format.json_schema = (
                json_schema if isinstance(json_schema, str) else json.dumps(json_schema))
        elif json_object:
            s.response_format.json_object = True
        elif regex is not None:
            s.response_format.regex = regex
        return request

    def _events(self, request: yoco_pb2.GenerateRequest):
        """The Generate stream's events with their call, retried on UNAVAILABLE before the first
        event (later the router moves the stream itself)."""
        for attempt in range(self._retries + 1):
            call = self._stub.Generate(request, timeout=self._timeout, metadata=self._metadata)
            got_any = False
            try:
                for event in call:
                    got_any = True
                    yield event, call
                return
            except grpc.RpcError as e:
                if not got_any and self._retry(e, attempt):
                    continue
                raise self._error(e) from None

    def score(self, prompt: Union[str, Sequence[int]], *, top_logprobs: int = 0) -> Scored:
        """The log-probability of every token of `prompt` (text, or token ids starting with BOS)
        given those before it: Scored.tokens[0] has none. Ranks candidate answers by how likely
        the model finds them after a question (score question + answer, sum the answer's)."""
        request = yoco_pb2.ScoreRequest(top_logprobs=top_logprobs)
        if isinstance(prompt, str):
            request.text = prompt
        else:
            request.tokens.ids.extend(prompt)
        response = self._unary(self._stub.Score, request)
        return Scored(tuple(_token(t) for t in response.tokens), response.total_logprob)

    def tokenize(self, text: str) -> List[int]:
        return list(self._unary(self._stub.Tokenize, yoco_pb2.TokenizeRequest(text=text)).ids)

    # --- plumbing ---

    def _unary(self, method, request):
        for attempt in range(self._retries + 1):
            try:
                return method(request, timeout=self._timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                if self._retry(e, attempt):
                    continue
                raise self._error(e) from None
        raise AssertionError("unreachable")

    def _retry(self, e: grpc.RpcError, attempt: int) -> bool:
        if e.code() != grpc.StatusCode.UNAVAILABLE or attempt >= self._retries:
            return False
        time.sleep(self._backoff * (2**attempt))
        return True

    @staticmethod
    def _error(e: grpc.RpcError) -> YocoError:
        trailers = dict(e.trailing_metadata() or ()) if hasattr(e, "trailing_metadata") else {}
        return YocoError(e.code(), e.details() or "", trailers.get("x-request-id", ""))
