#!/usr/bin/env python3
"""RAG against YOCO Serve: pre-cache three documents, then ask questions about each; every
question reuses its document's snapshot, so only the question is prefilled. Prints one JSON line
per pre-cached document and per answer (with its cached prompt tokens, its log-probability, and
its tokens' logprobs as generated and as scored afterwards, and three sampled candidates).

    PYTHONPATH=build/clients/python:clients/python \\
        python3 clients/python/examples/rag.py --router 127.0.0.1:50051
"""

import argparse
import json

from yoco_serve import YocoClient

DOCUMENTS = [
    "The lighthouse on Kestrel Point was built in 1874 from granite quarried on the island. "
    "Its lamp burned whale oil until 1911, then paraffin, and was electrified in 1952. The last "
    "keeper, Mara Quill, left in 1989 when the light was automated; the tower still flashes "
    "white every ten seconds and can be seen from twenty-two nautical miles away.",
    "Orvane Valley cheese is made only from the milk of cows grazing above 1200 metres between "
    "June and September. The curd is cut to the size of rice grains, pressed for a day, salted by "
    "hand and aged for at least fourteen months in caves that stay at nine degrees. A wheel weighs "
    "about forty kilograms and its rind is washed with brine twice a week.",
    "The Tarrow-Lisk railway climbs 1630 metres in 41 kilometres using three spiral tunnels and a "
    "rack section of 2.4 kilometres on the steepest grade. It opened in 1903, was electrified in "
    "1928 and still runs four trains a day in winter, when the road over the pass is closed for "
    "snow. Its oldest locomotive, number 7, is kept at Lisk station.",
]

RECORD = {"type": "object", "additionalProperties": False, "required": ["year", "place"],
          "properties": {"year": {"type": "integer"}, "place": {"type": "string", "maxLength": 20}}}

QUESTIONS = ["\nQuestion: When did this start?\nAnswer:", "\nQuestion: What is unusual?\nAnswer:"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--router", required=True, help="HOST:PORT of the router")
    parser.add_argument("--token", help="a tenant's bearer token")
    parser.add_argument("--tls-ca", help="the CA of the router's certificate (TLS on)")
    parser.add_argument("--tls-cert", help="a client certificate (mutual TLS)")
    parser.add_argument("--tls-key", help="its private key")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--show-prompts", action="store_true", help="print each prompt too")
    args = parser.parse_args()
    with YocoClient(args.router, token=args.token, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
                    tls_key=args.tls_key) as client:
        for d, document in enumerate(DOCUMENTS):
            cached = client.precache(document)
            print(json.dumps({"document": d, "handle": cached.handle, "tokens": cached.tokens,
                              "cached_tokens": cached.cached_tokens}), flush=True)
        for d, document in enumerate(DOCUMENTS):
            # Fields extracted as JSON: the answer is constrained to the schema, so it parses.
            record = client.ask(document + "\nAs JSON:", json_schema=RECORD, max_new_tokens=160,
                                temperature=0.7, seed=d)
            print(json.dumps({"document": d, "extracted": json.loads(record.text),
                              "finish_reason": record.finish_reason}), flush=True)
            # A verdict constrained by a regular expression: one of the words it allows.
            verdict = client.ask(document + "\nIs it a report (yes/no)?", regex="yes|no",
                                 max_new_tokens=4, temperature=0.7, seed=d)
            print(json.dumps({"document": d, "verdict": verdict.text,
                              "finish_reason": verdict.finish_reason}), flush=True)
        for d, document in enumerate(DOCUMENTS):
            for q, question in enumerate(QUESTIONS):
                # The answer's log-probability: a confidence to rank or filter answers by.
                answer = client.ask(document + question, max_new_tokens=args.max_new_tokens,
                                    logprobs=0, request_id=f"rag-doc{d}-q{q}")
                # The same answer scored afterwards, as a reranker scores a candidate (by token
                # ids: an answer's text need not tokenise back to the same ids).
                prompt_ids = [0] + client.tokenize(document + question)  # BOS first
                scored = client.score(prompt_ids + answer.token_ids)
                # Three sampled candidates from one prefill, each with its log-probability.
                candidates = client.ask_n(document + question, 3, temperature=0.8, seed=10 * d + q,
                                          max_new_tokens=args.max_new_tokens, logprobs=0)
                line = {"document": d, "question": question.strip(), "answer": answer.text,
                        "token_ids": answer.token_ids, "logprob": answer.logprob,
                        "scored_tail": [t.logprob for t in scored.tokens[-len(answer.token_ids):]],
                        "token_logprobs": [t.logprob for t in answer.tokens],
                        "candidates": [{"token_ids": c.token_ids, "logprob": c.logprob}
                                       for c in candidates],
                        "cached_prompt_tokens": answer.cached_prompt_tokens,
                        "prompt_tokens": answer.prompt_tokens, "request_id": answer.request_id}
                if args.show_prompts:
                    line["prompt"] = document + question
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
