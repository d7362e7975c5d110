"""Checks the C++ engine against this PyTorch YOCO: random weights (gRet and SWA, GQA, prompt
lengths off the 256-token chunk grid) are written as a checkpoint, the engine's `yoco logits`
scores the same tokens, and every logit must agree within 1e-4 x max |logit|. Also checks this
module against the golden sets the official code produced, so both implementations are tied
to the reference.

usage: check_engine.py --yoco build/bin/yoco --golden tests/data/golden [--models models]
                       [--work DIR]
With --models, every trained model there (a folder with model.safetensors) is checked too, on a
document-QA prompt: real weights, bf16.
With --long N, a gRet model of the tiny shape is checked on an N-token sequence (e.g. 65600,
past position 65536): the logits of its last 64 positions, where RoPE angles and the retention
decay in fp32 would drift first.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import yoco_model  # noqa: E402

TOLERANCE = 1e-4  # relative to the largest |logit|, as the issue states

CASES = [
    # name, params, prompt length
    ("gret-gqa", dict(dim=128, n_layers=4, hidden_dim=320, n_self_heads=2, n_attn_heads=4,
                      n_attn_kv_heads=2, vocab_size=264, max_seq_len=1024), 300),
    ("gret-mha-6-layers", dict(dim=96, n_layers=6, hidden_dim=192, n_self_heads=1,
                               n_attn_heads=3, n_attn_kv_heads=3, vocab_size=264,
                               rope_theta=500.0), 517),
    ("swa-window-37", dict(dim=128, n_layers=4, hidden_dim=256, n_self_heads=2, n_attn_heads=4,
                           n_attn_kv_heads=1, vocab_size=264, sliding_window=37), 200),
]


def random_model(params, seed):
    torch.manual_seed(seed)
    model = yoco_model.YOCO(params)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif p.dim() == 2:
                # Unit-scale activations (not the tiny 0.02 init) so that logits are large and
                # every path contributes; gt_proj spread so decays range from ~0.5 to ~1.
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
    return model


def compare(label, got, want):
    err = float(np.abs(got - want).max())
    scale = float(np.abs(want).max())
    ok = err <= TOLERANCE * scale
    print(f"{'ok  ' if ok else 'FAIL'} {label}: max abs error {err:.3e}, "
          f"max |logit| {scale:.3f}, ratio {err / scale:.2e}")
    return ok


def engine_logits(yoco, model_dir, tokens, work):
    out = os.path.join(work, "logits.npy")
    subprocess.run([yoco, "logits", "--model", model_dir, "--tokens",
                    ",".join(map(str, tokens)), "--out", out, "--threads", "2"], check=True)
    return np.load(out)


LONG_PARAMS = dict(dim=256, n_layers=4, hidden_dim=512, n_self_heads=2, n_attn_heads=4,
                   n_attn_kv_heads=2, vocab_size=512, max_seq_len=1 << 20)
LONG_LAST = 64


def last_logits(model, tokens, last):
    """model(tokens)[0, -last:] without the [T, T] attention matrices a long sequence would need:
    the cross decoder's rows depend on the shared K/V of every position but only on their own
    hidden state, so only the last rows go through it, attending to all keys."""
    p = model.params
    t = tokens.shape[1]
    positions = torch.arange(t)
    h = model.embed_tokens(tokens) * math.sqrt(p["dim"])
    for layer in model.self_decoder.layers:
        h = layer(h, positions)
    cd = model.cross_decoder
    da = p["dim"] // p["n_attn_heads"]
    kv_in = cd.kv_layer_norm(h)
    shape = (1, t, p["n_attn_kv_heads"], da)
    cos, sin = yoco_model.rope_tables(da, positions, p.get("rope_theta", 10000.0))
    shared_k = yoco_model.apply_rope(cd.k_proj(kv_in).view(shape), cos, sin).transpose(1, 2)
    shared_v = cd.v_proj(kv_in).view(shape).transpose(1, 2)
    h, tail = h[:, -last:], positions[-last:]
    for layer in cd.layers:
        attn = layer.mixer
        x = layer.mixer_layer_norm(h)
        cos, sin = yoco_model.rope_tables(da, tail, p.get("rope_theta", 10000.0))
        q = yoco_model.apply_rope(attn.q_proj(x).view(1, last, attn.heads, da), cos, sin)
        group = attn.heads // attn.kv_heads
        k = shared_k.repeat_interleave(group, dim=1)
        v = shared_v.repeat_interleave(group, dim=1)
        scores = (q.transpose(1, 2) @ k.transpose(-1, -2)) / math.sqrt(da)
        allowed = torch.arange(t)[None, :] <= tail[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
        o = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(1, last, p["dim"])
        h = h + attn.out_proj(o)
        h = h + layer.ffn(layer.final_layer_norm(h))
    return model.output_projection(model.layer_norm(h))[0]


def check_long(yoco, work, length):
    model = random_model(LONG_PARAMS, seed=300)
    model_dir = os.path.join(work, "long")
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "params.json"), "w") as f:
        json.dump(LONG_PARAMS, f)
    safetensors_io.save(os.path.join(model_dir, "model.safetensors"), model.state_dict())
    g = torch.Generator().manual_seed(301)
    tokens = [0] + torch.randint(4, LONG_PARAMS["vocab_size"], (length - 1,),
                                 generator=g).tolist()
    # The short path's full forward agrees with last_logits (so the long check compares the
    # same function).
    short = torch.tensor([tokens[:300]])
    with torch.no_grad():
        ok = compare("last-rows forward vs full forward, 300 tokens",
                     last_logits(model, short, LONG_LAST).double().numpy(),
                     model(short)[0, -LONG_LAST:].double().numpy())
        want = last_logits(model, torch.tensor([tokens]), LONG_LAST).double().numpy()
    tokens_file = os.path.join(work, "long_tokens.txt")
    with open(tokens_file, "w") as f:
        f.write(",".join(map(str, tokens)))
    out = os.path.join(work, "long_logits.npy")
    subprocess.run([yoco, "logits", "--model", model_dir, "--tokens-file", tokens_file,
                    "--last", str(LONG_LAST), "--out", out, "--threads", "2"], check=True)
    return ok & compare(f"engine vs PyTorch, positions {length - LONG_LAST}..{length - 1}",
                        np.load(out), want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yoco", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--models")
    ap.add_argument("--work")
    ap.add_argument("--long", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(2)
    ok = True
    # The chunkwise retention training runs must equal the one-matrix parallel form (double
    # precision, lengths on and off the chunk grid).
    g = torch.Generator().manual_seed(5)
    for t in (1, 63, 64, 200, 300):
        q, k, v = (torch.randn(2, 3, t, 16, generator=g, dtype=torch.float64) for _ in range(3))
        log_decay = torch.nn.functional.logsigmoid(
            3 * torch.randn(2, 3, t, generator=g, dtype=torch.float64)) / 16
        ok &= compare(f"chunkwise vs parallel retention, {t} tokens",
                      yoco_model.chunk_retention(q, k, v, log_decay, 64).numpy(),
                      yoco_model.parallel_retention(q, k, v, log_decay).numpy())
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for i, (name, params, length) in enumerate(CASES):
            model = random_model(params, seed=100 + i)
            model_dir = os.path.join(work, name)
            os.makedirs(model_dir)
            with open(os.path.join(model_dir, "params.json"), "w") as f:
                json.dump(params, f)
            safetensors_io.save(os.path.join(model_dir, "model.safetensors"), model.state_dict())
            g = torch.Generator().manual_seed(7 + i)
            tokens = [0] + torch.randint(4, params["vocab_size"], (length - 1,),
                                         generator=g).tolist()
            with torch.no_grad():
                want = model(torch.tensor([tokens]))[0].double().numpy()
            got = engine_logits(args.yoco, model_dir, tokens, work)
            ok &= compare(f"engine vs PyTorch, {name}, {length} tokens", got, want)
        for name in sorted(os.listdir(args.golden)):
            d = os.path.join(args.golden, name)
            with open(os.path.join(d, "params.json")) as f:
                model = yoco_model.YOCO(json.load(f))
            model.load_state_dict(safetensors_io.load(os.path.join(d, "model.safetensors")))
            with open(os.path.join(d, "tokens.json")) as f:
                tokens = json.load(f)
            with torch.no_grad():
                got = model(torch.tensor([tokens]))[0].double().numpy()
            ok &= compare(f"PyTorch vs official code, {name}", got,
                          np.load(os.path.join(d, "logits_full.npy")))
        for name in sorted(os.listdir(args.models)) if args.models else []:
            d = os.path.join(args.models, name)
            if not os.path.exists(os.path.join(d, "model.safetensors")):
                continue
            with open(os.path.join(d, "params.json")) as f:
                model = yoco_model.YOCO(json.load(f))
            model.load_state_dict(safetensors_io.load(os.path.join(d, "model.safetensors")))
            text = ("Tara Vogel lives in Lima. The code of Bruno Costa is 4821. Olga Weber is a "
                    "baker by trade.\nQ: What is the code of Bruno Costa?\nA:")
            tokens = [0] + [b + 4 for b in text.encode()]
            with torch.no_grad():
                want = model(torch.tensor([tokens]))[0].double().numpy()
            got = engine_logits(args.yoco, d, tokens, work)
            ok &= compare(f"engine vs PyTorch, trained {name}", got, want)
        if args.long:
            ok &= check_long(args.yoco, work, args.long)
    print("all agree" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
