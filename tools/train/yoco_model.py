"""YOCO in PyTorch, written from the reference spec (../shared/yoco_reference.md, kept in the
repository's docs as the model's math): a second, independent implementation of the engine's
model, used to train small models and to check the C++ engine logit for logit.

Full-sequence forward only (training and scoring); gated retention runs chunkwise (with the
parallel form kept as its check), as the engine's prefill does.
Parameter names are the reference's state-dict names, so a state dict saved from this module
is a checkpoint the engine loads.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

# params.json keys (the reference's YOCOArgs); the engine refuses any other key.
REQUIRED_KEYS = ("dim", "n_layers", "hidden_dim", "n_self_heads", "n_attn_heads",
                 "n_attn_kv_heads", "vocab_size")
OPTIONAL_KEYS = ("max_batch_size", "max_seq_len", "model_parallel_size", "load_checkpoint",
                 "rope_theta", "norm_eps", "sliding_window")


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if affine else None

    def forward(self, x):
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * self.weight if self.weight is not None else y


def rope_tables(head_dim, positions, theta):
    # Reference quirk: frequencies theta^(-i/(d/2-1)) (linspace), not theta^(-2i/d).
    inv = 1.0 / theta ** torch.linspace(0, 1, head_dim // 2, dtype=torch.float32)
    angles = positions.to(torch.float32)[:, None] * inv[None, :]
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    """Interleaved (GPT-J) pairs; x is [B, T, H, d], cos/sin are [T, d/2]."""
    even, odd = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.fc2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        # The activation is on fc1; `gate` is the linear branch.
        return self.fc2(F.silu(self.fc1(x)) * self.gate(x))


# Chunk length of the chunkwise gated retention. Any length gives the same result (the forms
# are identical); 64 keeps the per-chunk score matrices small for training on a CPU.
RETENTION_CHUNK = 64


def parallel_retention(q, k, v, log_decay):
    """o_t = sum_{u<=t} (q_t . k_u) prod_{s=u+1..t} decay_s v_u, as one [T, T] product;
    q/k/v are [B, H, T, d] (k already scaled), log_decay [B, H, T]."""
    t = q.shape[-2]
    cum = log_decay.cumsum(-1)
    # M[t, u] = exp(cum_t - cum_u) for u <= t: the product of the decays after u up to t.
    exponent = cum[..., :, None] - cum[..., None, :]
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    mask = torch.exp(exponent.masked_fill(~causal, float("-inf")))
    return ((q @ k.transpose(-1, -2)) * mask) @ v


def chunk_retention(q, k, v, log_decay, chunk):
    """The same sum, chunk by chunk: the parallel form inside a chunk, plus the carried
    [d, d] state for everything before it (reference spec section 2.3)."""
    b, h, t, d = q.shape
    pad = -t % chunk
    if pad:
        # Zero keys/values and unit decay at the end: invisible to the real positions.
        q, k, v = (F.pad(z, (0, 0, 0, pad)) for z in (q, k, v))
        log_decay = F.pad(log_decay, (0, pad))
    n = (t + pad) // chunk
    q, k, v = (z.view(b, h, n, chunk, d) for z in (q, k, v))
    local = log_decay.view(b, h, n, chunk).cumsum(-1)  # G_j, inclusive, per chunk
    exponent = local[..., :, None] - local[..., None, :]
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    inner = ((q @ k.transpose(-1, -2)) * torch.exp(exponent.masked_fill(~causal, float("-inf")))) @ v
    # What each chunk adds to the state: sum_k exp(G_last - G_k) k_k^T v_k.
    to_end = torch.exp(local[..., -1:] - local)[..., None]
    contribution = (k * to_end).transpose(-1, -2) @ v  # [B, H, n, d, d]
    chunk_decay = torch.exp(local[..., -1])[..., None, None]  # [B, H, n, 1, 1]
    states, state = [], q.new_zeros(b, h, d, d)
    for c in range(n):
        states.append(state)  # the state entering chunk c
        state = chunk_decay[:, :, c] * state + contribution[:, :, c]
    entering = torch.stack(states, dim=2)
    cross = (q * torch.exp(local)[..., None]) @ entering
    return (inner + cross).view(b, h, n * chunk, d)[:, :, :t]


def rotated_qkv(mixer, x, positions):
    """The self mixers' q, k (RoPE at `positions`) and v as [B, H, T, d]."""
    b, t, _ = x.shape
    cos, sin = rope_tables(mixer.head_dim, positions, mixer.theta)
    shape = (b, t, mixer.heads, mixer.head_dim)
    q = apply_rope(mixer.q_proj(x).view(shape), cos, sin).transpose(1, 2)
    k = apply_rope(mixer.k_proj(x).view(shape), cos, sin).transpose(1, 2)
    v = mixer.v_proj(x).view(shape).transpose(1, 2)
    return q, k, v


class GateRetention(nn.Module):
    def __init__(self, dim, heads, eps, theta):
        super().__init__()
        self.heads, self.head_dim, self.theta = heads, dim // heads, theta
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.g_proj = nn.Linear(dim, dim, bias=False)
        self.gt_proj = nn.Linear(dim, heads, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        self.subln = RMSNorm(self.head_dim, eps, affine=False)

    def forward(self, x, positions):
        b, t, d = x.shape
        q, k, v = rotated_qkv(self, x, positions)
        k = k * self.head_dim ** -0.5
        log_decay = F.logsigmoid(self.gt_proj(x).float()).transpose(1, 2) / 16.0  # [B, H, T]
        o = chunk_retention(q, k, v, log_decay, RETENTION_CHUNK)
        o = self.subln(o).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(F.silu(self.g_proj(x)) * o)


def causal_attention(q, k, v, window=None):
    """Softmax attention, q/k/v [B, H, T, d] (k/v already expanded for GQA); each query sees
    keys at or before it, and with `window` W only the last W of them (itself included)."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    i = torch.arange(t, device=q.device)
    allowed = i[None, :] <= i[:, None]
    if window is not None:
        allowed &= i[None, :] > i[:, None] - window
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class SlidingWindowAttention(nn.Module):
    def __init__(self, dim, heads, window, theta):
        super().__init__()
        self.heads, self.head_dim, self.window, self.theta = heads, dim // heads, window, theta
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, positions):
        b, t, d = x.shape
        q, k, v = rotated_qkv(self, x, positions)
        o = causal_attention(q, k, v, self.window).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(o)


class CrossAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, theta):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.theta = heads, kv_heads, dim // heads, theta
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, shared_k, shared_v, positions):
        b, t, d = x.shape
        cos, sin = rope_tables(self.head_dim, positions, self.theta)
        q = apply_rope(self.q_proj(x).view(b, t, self.heads, self.head_dim), cos, sin)
        group = self.heads // self.kv_heads  # query head h reads KV head h // group
        k = shared_k.repeat_interleave(group, dim=1)
        v = shared_v.repeat_interleave(group, dim=1)
        o = causal_attention(q.transpose(1, 2), k, v).transpose(1, 2).reshape(b, t, d)
        return self.out_proj(o)


class DecoderLayer(nn.Module):
    def __init__(self, mixer, dim, hidden, eps):
        super().__init__()
        self.mixer = mixer
        self.mixer_layer_norm = RMSNorm(dim, eps)
        self.ffn = FeedForward(dim, hidden)
        self.final_layer_norm = RMSNorm(dim, eps)

    def forward(self, h, *mixer_args):
        h = h + self.mixer(self.mixer_layer_norm(h), *mixer_args)
        return h + self.ffn(self.final_layer_norm(h))


class SelfDecoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class CrossDecoder(nn.Module):
    def __init__(self, p, layers):
        super().__init__()
        dim, kv_width = p["dim"], p["n_attn_kv_heads"] * (p["dim"] // p["n_attn_heads"])
        self.k_proj = nn.Linear(dim, kv_width, bias=False)
        self.v_proj = nn.Linear(dim, kv_width, bias=False)
        self.kv_layer_norm = RMSNorm(dim, p.get("norm_eps", 1e-5))
        self.layers = nn.ModuleList(layers)


class YOCO(nn.Module):
    def __init__(self, params):
        super().__init__()
        unknown = set(params) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS)
        if unknown:
            raise ValueError(f"unknown params.json keys: {sorted(unknown)}")
        p = dict(params)
        self.params = p
        dim, hidden, eps = p["dim"], p["hidden_dim"], p.get("norm_eps", 1e-5)
        theta = p.get("rope_theta", 10000.0)
        window = p.get("sliding_window")
        half = p["n_layers"] // 2
        self.embed_tokens = nn.Embedding(p["vocab_size"], dim)
        self.output_projection = nn.Linear(dim, p["vocab_size"], bias=False)

        def self_mixer():
            if window is not None:
                return SlidingWindowAttention(dim, p["n_self_heads"], window, theta)
            return GateRetention(dim, p["n_self_heads"], eps, theta)

        self.self_decoder = SelfDecoder(
            [DecoderLayer(self_mixer(), dim, hidden, eps) for _ in range(half)])
        cross = [DecoderLayer(CrossAttention(dim, p["n_attn_heads"], p["n_attn_kv_heads"], theta),
                              dim, hidden, eps) for _ in range(half)]
        self.cross_decoder = CrossDecoder(p, cross)
        self.layer_norm = RMSNorm(dim, eps)

    def forward(self, tokens):
        """Logits [B, T, V] for tokens [B, T] at positions 0..T-1."""
        b, t = tokens.shape
        positions = torch.arange(t, device=tokens.device)
        h = self.embed_tokens(tokens) * math.sqrt(self.params["dim"])
        for layer in self.self_decoder.layers:
            h = layer(h, positions)
        cd = self.cross_decoder
        da = self.params["dim"] // self.params["n_attn_heads"]
        kv_in = cd.kv_layer_norm(h)
        shape = (b, t, self.params["n_attn_kv_heads"], da)
        cos, sin = rope_tables(da, positions, self.params.get("rope_theta", 10000.0))
        shared_k = apply_rope(cd.k_proj(kv_in).view(shape), cos, sin).transpose(1, 2)
        shared_v = cd.v_proj(kv_in).view(shape).transpose(1, 2)
        for layer in cd.layers:
            h = layer(h, shared_k, shared_v, positions)
        return self.output_projection(self.layer_norm(h))
