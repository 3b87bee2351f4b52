"""attnphys.nn against PyTorch 1.13 on the same weights (float32 tolerance), plus error handling."""
import numpy as np
import pytest

import attnphys
from attnphys import nn

torch = pytest.importorskip("torch")


def _load_torch(module, ours):
    """Copies our parameters into a torch module by name (ours follow torch's names)."""
    state = module.state_dict()
    for name in ours.names:
        assert name in state, name
        state[name] = torch.tensor(ours.get(name))
    module.load_state_dict(state)


def _rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(np.asarray(b)), 1e-30)


@pytest.mark.parametrize("causal,padding", [(False, False), (True, False), (False, True)])
def test_multihead_attention_matches_torch(causal, padding):
    B, N, d, H = 3, 7, 16, 4
    ours = nn.MultiheadAttentionF32(d, H, causal=causal, seed=3)
    ref = torch.nn.MultiheadAttention(d, H, batch_first=True)
    _load_torch(ref, ours)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, N, d)).astype(np.float32)
    dy = rng.standard_normal((B, N, d)).astype(np.float32)
    mask = np.ones((B, N), dtype=np.int32)
    mask[1, 5:] = 0
    y = ours.forward(x, key_mask=mask if padding else None)
    dx = ours.backward(dy)

    xt = torch.tensor(x, requires_grad=True)
    kwargs = {}
    if causal:
        kwargs["attn_mask"] = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
    if padding:
        kwargs["key_padding_mask"] = torch.tensor(mask == 0)
    yt, wt = ref(xt, xt, xt, need_weights=True, average_attn_weights=False, **kwargs)
    (yt * torch.tensor(dy)).sum().backward()
    assert _rel(y, yt.detach().numpy()) < 1e-5
    assert _rel(dx, xt.grad.numpy()) < 1e-5
    for name, p in ref.named_parameters():
        assert _rel(ours.grad(name), p.grad.numpy()) < 1e-5, name
    # The exported weights are torch's attention probabilities.
    w = ours.attention_weights(1, 2, 4)
    assert _rel(w, wt[1, 2, 4].detach().numpy()) < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_encoder_matches_torch_transformer_encoder(dtype):
    B, N, d, H, L, F = 2, 9, 16, 2, 2, 24
    cls = nn.EncoderF32 if dtype == "float32" else nn.Encoder
    ours = cls(d_model=d, n_heads=H, n_layers=L, d_ff=F, seed=5)
    layer = torch.nn.TransformerEncoderLayer(d, H, dim_feedforward=F, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
    ref = torch.nn.TransformerEncoder(layer, L, norm=torch.nn.LayerNorm(d), enable_nested_tensor=False)
    ref = ref.to(getattr(torch, dtype)).train()  # train mode: no fused fast path
    # Give the norms non-trivial values so their gradients are tested too.
    rng = np.random.default_rng(1)
    for name in ours.names:
        if "norm" in name:
            ours.set(name, ours.get(name) + 0.1 * rng.standard_normal(ours.get(name).shape))
    _load_torch(ref, ours)
    x = rng.standard_normal((B, N, d)).astype(dtype)
    dy = rng.standard_normal((B, N, d)).astype(dtype)
    y = ours.forward(x)
    dx = ours.backward(dy)
    xt = torch.tensor(x, requires_grad=True)
    yt = ref(xt)
    (yt * torch.tensor(dy)).sum().backward()
    tol = 2e-5 if dtype == "float32" else 1e-11
    assert _rel(y, yt.detach().numpy()) < tol
    assert _rel(dx, xt.grad.numpy()) < tol
    for name, p in ref.named_parameters():
        assert _rel(ours.grad(name), p.grad.numpy()) < tol, name


def test_encoder_bf16_matches_float32_or_is_refused():
    """attention_precision = bf16 (AMX or AVX512-BF16) and matmul_precision = bf16 (AMX): within bf16 rounding of
    float32 where they run; elsewhere a clear attnphys.Error that says what to set."""
    opts = dict(d_model=32, n_heads=2, n_layers=2, d_ff=64, attention="tiled", seed=3)
    info = attnphys.info()
    assert info["bf16_attention"] in ("amx", "avx512-bf16", "none")
    if not info["amx_bf16"]:
        assert info["amx_reason"]
        with pytest.raises(attnphys.Error, match="matmul_precision = float32"):
            nn.EncoderF32(matmul_precision="bf16", **opts)
    if info["bf16_attention"] == "none":
        with pytest.raises(attnphys.Error, match="float32"):
            nn.EncoderF32(attention_precision="bf16", **opts)
        return
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 70, 32)).astype("float32")
    dy = rng.standard_normal((2, 70, 32)).astype("float32")
    low_opts = dict(attention_precision="bf16", **opts)
    if info["amx_bf16"]:
        low_opts["matmul_precision"] = "bf16"
    ref, low = nn.EncoderF32(**opts), nn.EncoderF32(**low_opts)
    y_ref, y = ref.forward(x), low.forward(x)
    dx_ref, dx = ref.backward(dy), low.backward(dy)
    assert 0 < _rel(y, y_ref) < 1e-2
    assert _rel(dx, dx_ref) < 2e-2
    with pytest.raises(attnphys.Error, match="head width"):
        nn.EncoderF32(attention_precision="bf16", d_model=32, n_heads=1, attention="tiled")


def test_layers_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 6))
    w = rng.standard_normal((4, 6))
    b = rng.standard_normal(4)
    assert _rel(nn.linear(x, w, b), x @ w.T + b) < 1e-14
    xt = torch.tensor(x)
    assert _rel(nn.gelu(x), torch.nn.functional.gelu(xt).numpy()) < 1e-14
    assert _rel(nn.softmax(x), torch.softmax(xt, dim=1).numpy()) < 1e-14
    g = rng.standard_normal(6)
    beta = rng.standard_normal(6)
    y, mean, rstd = nn.layer_norm(x, g, beta)
    assert _rel(y, torch.nn.functional.layer_norm(xt, (6,), torch.tensor(g), torch.tensor(beta)).numpy()) < 1e-12
    dy = rng.standard_normal((5, 6))
    xt.requires_grad_(True)
    torch.nn.functional.gelu(xt).backward(torch.tensor(dy))
    assert _rel(nn.gelu_backward(dy, x), xt.grad.numpy()) < 1e-12


def test_per_sample_gradients_sum_to_batch_gradient():
    enc = nn.Encoder(d_in=2, d_model=8, n_heads=2, n_layers=1, attention="factored", max_len=5, periodic=True,
                     seed=1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5, 2))
    dy = rng.standard_normal((4, 5, 8))
    jac = enc.per_sample_gradients(x, dy)
    assert jac.shape == (4, enc.num_parameters)
    enc.zero_grad()
    enc.forward(x)
    enc.backward(dy)
    assert _rel(jac.sum(axis=0), enc.gradients()) < 1e-12


def test_errors_reach_python():
    with pytest.raises(attnphys.Error, match="did you mean|unknown option"):
        nn.Encoder(d_modle=8)
    with pytest.raises(attnphys.Error, match="multiple of n_heads"):
        nn.Encoder(d_model=10, n_heads=4)
    enc = nn.Encoder(d_model=8, n_heads=2, n_layers=1)
    with pytest.raises(attnphys.Error, match="x must have shape"):
        enc.forward(np.zeros((2, 3, 5)))
    with pytest.raises(attnphys.Error, match="call forward first"):
        enc.backward(np.zeros((2, 3, 8)))
    enc.forward(np.zeros((2, 3, 8)))
    with pytest.raises(attnphys.Error, match="dy must have"):
        enc.backward(np.zeros((2, 4, 8)))
    with pytest.raises(attnphys.Error, match="no parameter named"):
        enc.get("nope")
    with pytest.raises(attnphys.Error, match="out of range"):
        enc.attention_weights(0, 5, 0, 0)
