"""attnphys.operator.Surrogate(kind="conditioned"): the channel-conditioned kernel attention from Python."""
import numpy as np
import pytest

import attnphys
import attnphys.heat
from attnphys.operator import Surrogate, Trainer


def _data(count=24, n=8):
    h, dt = 1.0 / n, 2e-3
    u0 = attnphys.heat.initial_conditions((n, n), h, count=count, seed=1, length_scale=0.3)
    kappa = np.stack([attnphys.heat.random_kappa((n, n), h, 0.3, 3.0, 0.3, seed=s) for s in range(count)])
    u1 = np.stack([attnphys.heat.solve(u, dt, h, kappa=k) for u, k in zip(u0, kappa)])
    return u0, u1, kappa


def test_conditioned_fits_predicts_and_round_trips(tmp_path):
    u0, u1, kappa = _data()
    model = Surrogate("conditioned", d_model=8, n_heads=2, d_k=8, harmonics=2, channels=("kappa",))
    Trainer(model, lr=1e-2, steps=20, batch=8, eval_every=10).fit(u0[:16], u1[:16], channels={"kappa": kappa[:16]})
    pred = model.predict(u0[16:], kappa=kappa[16:])
    assert pred.shape == u0[16:].shape and np.all(np.isfinite(pred))
    # Affine in the field for fixed kappa: f(a u + b v) - f(0) = a (f(u) - f(0)) + b (f(v) - f(0)) (float32).
    z = np.zeros_like(u0[16:])
    f0, fu, fv = (model.predict(x, kappa=kappa[16:]) for x in (z, u0[16:], u1[16:]))
    fm = model.predict(0.5 * u0[16:] - 2.0 * u1[16:], kappa=kappa[16:])
    assert np.abs(fm - f0 - (0.5 * (fu - f0) - 2.0 * (fv - f0))).max() < 1e-4 * np.abs(fu).max()
    model.save(str(tmp_path / "c.h5"))
    assert np.array_equal(Surrogate.load(str(tmp_path / "c.h5")).predict(u0[16:], kappa=kappa[16:]), pred)


def test_conditioned_without_channels_says_what_to_set():
    with pytest.raises(attnphys.Error, match="channels"):
        Surrogate("conditioned", d_model=8)


def test_conditioned_local_term_from_python(tmp_path):
    # local_radius adds the conditioned local stencil term: more parameters, still affine in u, saved and loaded.
    u0, u1, kappa = _data()
    plain = Surrogate("conditioned", d_model=8, n_heads=2, d_k=8, harmonics=2, channels=("kappa",))
    local = Surrogate("conditioned", d_model=8, n_heads=2, d_k=8, harmonics=2, channels=("kappa",), local_radius=1)
    assert local.n_parameters > plain.n_parameters
    Trainer(local, lr=1e-2, steps=20, batch=8, eval_every=10).fit(u0[:16], u1[:16], channels={"kappa": kappa[:16]})
    pred = local.predict(u0[16:], kappa=kappa[16:])
    z = np.zeros_like(u0[16:])
    f0, fu = local.predict(z, kappa=kappa[16:]), local.predict(2.0 * u0[16:], kappa=kappa[16:])
    assert np.abs((fu - f0) - 2.0 * (pred - f0)).max() < 1e-4 * np.abs(fu).max()
    local.save(str(tmp_path / "l.h5"))
    assert np.array_equal(Surrogate.load(str(tmp_path / "l.h5")).predict(u0[16:], kappa=kappa[16:]), pred)
    with pytest.raises(attnphys.Error, match="local_radius"):
        Surrogate("transformer", local_radius=2)


def test_local_edge_from_python(tmp_path):
    # local_edge = "odd": beyond a Dirichlet side the local term reads minus the mirrored cell. A model on a Dirichlet
    # box trains and keeps the choice through save/load (identical predictions); bad values and a missing local term
    # say what to change. (The kernels' gradients and where the rule applies: tests/solvers/test_heat_training_3d.cpp.)
    u0, u1, kappa = _data()
    kw = dict(d_model=8, n_heads=2, d_k=8, n_layers=1, harmonics=2, channels=("kappa",), local_radius=1, bc="dirichlet")
    odd = Surrogate("conditioned", local_edge="odd", seed=3, **kw)
    assert odd.options["local_edge"] == "odd"
    assert Surrogate("conditioned", **kw).options["local_edge"] == "clamp"
    Trainer(odd, lr=1e-2, steps=20, batch=8, eval_every=10).fit(u0[:16], u1[:16], channels={"kappa": kappa[:16]})
    pred = odd.predict(u0[16:], kappa=kappa[16:])
    odd.save(str(tmp_path / "odd.h5"))
    back = Surrogate.load(str(tmp_path / "odd.h5"))
    assert back.options["local_edge"] == "odd"
    assert np.array_equal(back.predict(u0[16:], kappa=kappa[16:]), pred)
    with pytest.raises(attnphys.Error, match="local_edge"):
        Surrogate("conditioned", local_edge="mirror", **kw)
    with pytest.raises(attnphys.Error, match="local_radius"):
        Surrogate("conditioned", d_model=8, harmonics=2, channels=("kappa",), local_edge="odd")


def test_channel_window_from_python(tmp_path):
    # channel_window = w: kappa's values at the (2w+1)^2 - 1 neighbours join the conditioning (wider first layer),
    # kept through save/load; it belongs to the conditioned kind only.
    u0, u1, kappa = _data()
    kw = dict(d_model=8, n_heads=2, d_k=8, harmonics=2, channels=("kappa",), local_radius=1)
    plain, wide = Surrogate("conditioned", **kw), Surrogate("conditioned", channel_window=1, **kw)
    assert wide.n_parameters > plain.n_parameters
    Trainer(wide, lr=1e-2, steps=10, batch=8, eval_every=10).fit(u0[:16], u1[:16], channels={"kappa": kappa[:16]})
    pred = wide.predict(u0[16:], kappa=kappa[16:])
    wide.save(str(tmp_path / "w.h5"))
    back = Surrogate.load(str(tmp_path / "w.h5"))
    assert back.options["channel_window"] == 1
    assert np.array_equal(back.predict(u0[16:], kappa=kappa[16:]), pred)
    with pytest.raises(attnphys.Error, match="channel_window=1 applies to kind='conditioned'"):
        Surrogate("transformer", channel_window=1)


def test_layer_repeat_from_python(tmp_path):
    # layer_repeat = K: each layer's stencil update runs K times with the same weights (no new parameters; a
    # different map), kept through save/load; refused with global attention on.
    u0, u1, kappa = _data()
    kw = dict(d_model=8, n_heads=0, harmonics=2, channels=("kappa",), local_radius=1, local_edge="odd")
    one, rep = Surrogate("conditioned", **kw), Surrogate("conditioned", layer_repeat=3, **kw)
    assert rep.n_parameters == one.n_parameters
    Trainer(rep, lr=1e-2, steps=10, batch=8, eval_every=10).fit(u0[:16], u1[:16], channels={"kappa": kappa[:16]})
    pred = rep.predict(u0[16:], kappa=kappa[16:])
    assert np.all(np.isfinite(pred))
    rep.save(str(tmp_path / "r.h5"))
    back = Surrogate.load(str(tmp_path / "r.h5"))
    assert back.options["layer_repeat"] == 3
    assert np.array_equal(back.predict(u0[16:], kappa=kappa[16:]), pred)
    with pytest.raises(attnphys.Error, match="layer_repeat"):
        Surrogate("conditioned", layer_repeat=2, d_model=8, n_heads=2, channels=("kappa",), local_radius=1)


def test_conditioned_bf16_attention_trains_like_float32_or_is_refused(tmp_path):
    # attention_precision="bf16": the global attention's products in bf16 (AMX or AVX512-BF16). Trained from the same
    # seed on the same data for 20 steps, its predictions stay within 2e-2 of the float32 model's (relative to their
    # largest magnitude) and differ from them (the bf16 kernels ran); save/load keeps the precision (identical
    # predictions). Where no bf16 unit exists the option is refused with what to set.
    kw = dict(d_model=8, n_heads=2, d_k=16, harmonics=2, channels=("kappa",))
    if attnphys.info()["bf16_attention"] == "none":
        with pytest.raises(attnphys.Error, match="attention_precision = float32"):
            Surrogate("conditioned", attention_precision="bf16", **kw)
        return
    u0, u1, kappa = _data(n=12)
    preds = {}
    for prec in ("float32", "bf16"):
        model = Surrogate("conditioned", attention_precision=prec, **kw)
        Trainer(model, lr=1e-2, steps=20, batch=8, eval_every=10).fit(u0[:16], u1[:16],
                                                                     channels={"kappa": kappa[:16]})
        preds[prec] = model.predict(u0[16:], kappa=kappa[16:])
    dev = np.abs(preds["bf16"] - preds["float32"]).max() / np.abs(preds["float32"]).max()
    assert 0 < dev < 2e-2, dev
    model.save(str(tmp_path / "b.h5"))
    assert np.array_equal(Surrogate.load(str(tmp_path / "b.h5")).predict(u0[16:], kappa=kappa[16:]), preds["bf16"])
    # Loaded in float32 (as on a CPU without a bf16 unit): the same parameters predict within bf16 rounding, and a
    # save of that model keeps float32.
    f32 = Surrogate.load(str(tmp_path / "b.h5"), attention_precision="float32")
    p32 = f32.predict(u0[16:], kappa=kappa[16:])
    assert 0 < np.abs(p32 - preds["bf16"]).max() / np.abs(p32).max() < 2e-2
    f32.save(str(tmp_path / "f.h5"))
    assert np.array_equal(Surrogate.load(str(tmp_path / "f.h5")).predict(u0[16:], kappa=kappa[16:]), p32)
    with pytest.raises(attnphys.Error, match="attention_precision"):
        Surrogate.load(str(tmp_path / "b.h5"), attention_precision="fp8")
    with pytest.raises(attnphys.Error, match="d_k = 16"):
        Surrogate("conditioned", attention_precision="bf16", d_model=8, n_heads=2, d_k=8, channels=("kappa",))
    with pytest.raises(attnphys.Error, match="attention_precision"):
        Surrogate("kernel", attention_precision="bf16")
