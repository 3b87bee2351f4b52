"""Attention operators (attnphys.nn): the transformer encoder, a bare multi-head attention layer and the elementary
layers, computed by the C++/Kokkos core.

``Encoder(**options)`` takes EncoderOptions' fields as keywords (``d_model=64, n_heads=4, attention="tiled"``,
``positional="coords", coord_dim=2``, ``seed=0``); ``EncoderF32`` is the float32 twin. Arrays are numpy:
tokens ``(B, N, features)``, coordinates ``(B or 1, N, coord_dim)``, key masks ``(B, N)`` ints (nonzero = attend).
Parameter names follow ``torch.nn.TransformerEncoder`` (``layers.0.self_attn.in_proj_weight``...), so weights copy
over one to one.
"""
from ._core.nn import (  # noqa: F401
    Encoder,
    EncoderF32,
    MultiheadAttention,
    MultiheadAttentionF32,
    gelu,
    gelu_backward,
    layer_norm,
    layer_norm_backward,
    linear,
    linear_backward,
    softmax,
    softmax_backward,
)
