#!/usr/bin/env python3
"""Checks a Server-Sent Events body as OpenAI streams it, byte for byte: only
"data: <compact JSON>\\n\\n" events, ending with exactly "data: [DONE]\\n\\n"; every chunk of one
id; a usage chunk with no choices when asked. Prints the streamed text (JSON: text,
finish_reason, usage) for the caller to compare.
  sse_check.py FILE chat|completion [usage]"""
import json
import sys

raw = open(sys.argv[1], "rb").read()
chat = sys.argv[2] == "chat"
want_usage = len(sys.argv) > 3 and sys.argv[3] == "usage"
assert raw.endswith(b"data: [DONE]\n\n"), "the stream does not end with data: [DONE]"
events = raw.split(b"\n\n")
assert events[-1] == b"", "bytes after the last event"
events = events[:-1]
assert events[-1] == b"data: [DONE]"
chunks = []
for e in events[:-1]:
    assert e.startswith(b"data: "), "an event that is not data: %r" % e[:40]
    body = e[len(b"data: "):]
    assert b"\n" not in body and b"\r" not in body, "a line break inside an event"
    obj = json.loads(body.decode("utf-8"))
    # Compact JSON, keys as the server orders them: re-serialising gives the same bytes.
    again = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    assert again.encode("utf-8") == body, "not compact, sorted JSON: %r" % body[:80]
    chunks.append(obj)
ids = {c["id"] for c in chunks}
assert len(ids) == 1, "chunks of several ids"
obj_name = "chat.completion.chunk" if chat else "text_completion"
assert all(c["object"] == obj_name for c in chunks)
usage = None
if want_usage:
    last = chunks.pop()
    assert last["choices"] == [] and "usage" in last, "no final usage chunk"
    usage = last["usage"]
    assert "cached_tokens" in usage["prompt_tokens_details"]
text = ""
finish = None
for i, c in enumerate(chunks):
    assert "usage" not in c
    (choice,) = c["choices"]
    assert choice["index"] == 0
    if chat:
        delta = choice["delta"]
        assert ("role" in delta) == (i == 0), "the role belongs to the first chunk only"
        text += delta.get("content", "")
    else:
        text += choice["text"]
    if choice["finish_reason"] is not None:
        assert i == len(chunks) - 1, "a finish reason before the last chunk"
        finish = choice["finish_reason"]
assert finish in ("stop", "length"), "no finish reason"
print(json.dumps({"text": text, "finish_reason": finish, "usage": usage}))
