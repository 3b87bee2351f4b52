"""attnphys.nn.MultiheadAttention(kind="physics") (Transolver's Physics-Attention) against a small PyTorch module
written from the same formula, on the same weights: outputs, input and parameter gradients, slice weights."""
import numpy as np
import pytest

from attnphys import nn

torch = pytest.importorskip("torch")

EPS = 1e-5  # per-token epsilon of the slice normaliser (physics_attention.hpp)


class _Slice(torch.nn.Module):
    def __init__(self, H, dh, M):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(H, dh, M))
        self.bias = torch.nn.Parameter(torch.zeros(H, M))


class PhysicsAttentionRef(torch.nn.Module):
    """fx = x W_fx^T + b, xm = x W_x^T + b; w = softmax_m((xm_h W_slice[h] + b_slice[h]) / exp(log_tau_h));
    z = w^T fx_h / (sum_i w + N eps); z' = softmax(q k^T / sqrt(dh)) v with q, k, v = z W^T (shared by heads);
    o = w z'; out_proj of the merged heads."""

    def __init__(self, d, H, M):
        super().__init__()
        self.H, self.dh = H, d // H
        self.in_proj_fx = torch.nn.Linear(d, d)
        self.in_proj_x = torch.nn.Linear(d, d)
        self.slice = _Slice(H, self.dh, M)
        self.log_tau = torch.nn.Parameter(torch.zeros(H))
        self.to_q = torch.nn.Linear(self.dh, self.dh, bias=False)
        self.to_k = torch.nn.Linear(self.dh, self.dh, bias=False)
        self.to_v = torch.nn.Linear(self.dh, self.dh, bias=False)
        self.out_proj = torch.nn.Linear(d, d)

    def forward(self, x):
        B, N, d = x.shape
        heads = lambda t: t.view(B, N, self.H, self.dh).permute(0, 2, 1, 3)  # noqa: E731  [B, H, N, dh]
        fx, xm = heads(self.in_proj_fx(x)), heads(self.in_proj_x(x))
        s = torch.einsum("bhnc,hcm->bhnm", xm, self.slice.weight) + self.slice.bias[None, :, None, :]
        w = torch.softmax(s / torch.exp(self.log_tau)[None, :, None, None], dim=-1)
        den = w.sum(2) + N * EPS
        z = torch.einsum("bhnm,bhnc->bhmc", w, fx) / den[..., None]
        q, k, v = self.to_q(z), self.to_k(z), self.to_v(z)
        zo = torch.softmax(q @ k.transpose(-1, -2) / self.dh ** 0.5, dim=-1) @ v
        o = torch.einsum("bhnm,bhmc->bhnc", w, zo).permute(0, 2, 1, 3).reshape(B, N, d)
        return self.out_proj(o), w


def _rel(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(np.asarray(b)), 1e-30)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_physics_attention_matches_torch_reference(dtype):
    B, N, d, H, M = 2, 9, 16, 4, 5
    cls = nn.MultiheadAttention if dtype == "float64" else nn.MultiheadAttentionF32
    tol = 1e-11 if dtype == "float64" else 2e-5
    ours = cls(d, H, kind="physics", n_slices=M, seed=4)
    rng = np.random.default_rng(1)
    ours.set_parameters(ours.parameters() + 0.1 * rng.standard_normal(ours.num_parameters).astype(dtype))
    ref = PhysicsAttentionRef(d, H, M).to(getattr(torch, dtype))
    state = ref.state_dict()
    assert sorted(state) == sorted(ours.names)
    for name in ours.names:
        assert tuple(state[name].shape) == ours.get(name).shape, name
        state[name] = torch.tensor(ours.get(name))
    ref.load_state_dict(state)

    x = rng.standard_normal((B, N, d)).astype(dtype)
    dy = rng.standard_normal((B, N, d)).astype(dtype)
    y = ours.forward(x)
    dx = ours.backward(dy)
    xt = torch.tensor(x, requires_grad=True)
    yt, wt = ref(xt)
    (yt * torch.tensor(dy)).sum().backward()
    assert _rel(y, yt.detach().numpy()) < tol
    assert _rel(dx, xt.grad.numpy()) < tol
    for name, p in ref.named_parameters():
        assert _rel(ours.grad(name), p.grad.numpy()) < tol, name
    assert _rel(ours.slice_weights(1, 2, 4), wt[1, 2, 4].detach().numpy()) < tol
    assert ours.attention_weights(1, 2, 4).shape == (N,)


def test_encoder_takes_physics_attention_and_refuses_key_masks():
    enc = nn.Encoder(d_in=3, d_model=8, n_heads=2, n_layers=1, attention="physics", n_slices=4, seed=1)
    assert enc.get("layers.0.self_attn.slice.weight").shape == (2, 4, 4)
    x = np.random.default_rng(2).standard_normal((2, 6, 3))
    assert enc.forward(x).shape == (2, 6, 8)
    with pytest.raises(Exception, match="physics attention takes no key mask"):
        enc.forward(x, key_mask=np.ones((2, 6), dtype=np.int32))
