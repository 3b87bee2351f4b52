"""The Python package: import, info, errors as exceptions, gemm, RNG, optimizers against PyTorch, checkpoints."""
import os

import numpy as np
import pytest

import attnphys


def test_info_reports_kokkos():
    i = attnphys.info()
    assert i["kokkos_version"].count(".") == 2
    assert i["default_execution_space"] in i["execution_spaces"]
    assert i["concurrency"] >= 1
    assert "mpi" in i and i["mpi"]["ranks"] >= 1


def test_errors_are_python_exceptions():
    a = np.zeros((3, 4))
    b = np.zeros((5, 2))
    with pytest.raises(attnphys.Error, match="inner dimensions differ"):
        attnphys.gemm(a, b)
    assert issubclass(attnphys.Error, RuntimeError)
    buf = attnphys.ParameterBuffer()
    with pytest.raises(attnphys.Error, match="before allocate"):
        buf.get()
    with pytest.raises(attnphys.Error, match="must be"):
        attnphys.Optimizer(kind="rmsprop")


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-4)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_matches_numpy(dtype, tol, ta, tb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((17, 13) if ta else (13, 17)).astype(dtype)
    b = rng.standard_normal((15, 17) if tb else (17, 15)).astype(dtype)
    c = attnphys.gemm(a, b, ta, tb)
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    assert c.dtype == dtype
    np.testing.assert_allclose(c, ref, rtol=tol, atol=tol)


def test_random_is_reproducible():
    a = attnphys.random_normal(1000, seed=5)
    b = attnphys.random_normal(1000, seed=5)
    c = attnphys.random_normal(1000, seed=6)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    u = attnphys.random_uniform(1000, seed=1)
    assert u.min() >= 0 and u.max() < 1


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])
def test_optimizer_matches_torch(kind):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal(10)
    buf = attnphys.ParameterBuffer()
    buf.add("w", [10])
    buf.allocate()
    buf.set(p0)
    tp = torch.tensor(p0.copy(), requires_grad=True)
    wd = 0.05
    if kind == "sgd":
        opt = attnphys.Optimizer("sgd", lr=0.1, momentum=0.9, weight_decay=wd)
        topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9, weight_decay=wd)
    elif kind == "adam":
        opt = attnphys.Optimizer("adam", lr=0.01, weight_decay=wd)
        topt = torch.optim.Adam([tp], lr=0.01, weight_decay=wd)
    else:
        opt = attnphys.Optimizer("adamw", lr=0.01, weight_decay=wd)
        topt = torch.optim.AdamW([tp], lr=0.01, weight_decay=wd)
    for step in range(5):
        g = rng.standard_normal(10)
        buf.set(g, "grads")
        opt.step(buf, 0.1 if kind == "sgd" else 0.01)
        tp.grad = torch.tensor(g)
        topt.step()
    np.testing.assert_allclose(buf.get(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_parameter_checkpoint_round_trip(tmp_path):
    buf = attnphys.ParameterBuffer()
    buf.add("w", [3, 2])
    buf.add("b", [2], decay=False)
    buf.allocate()
    v = attnphys.random_normal(8, seed=2)
    buf.set(v)
    path = str(tmp_path / "p.h5")
    buf.save(path)
    other = attnphys.ParameterBuffer()
    other.add("w", [3, 2])
    other.add("b", [2], decay=False)
    other.allocate()
    other.load(path)
    assert np.array_equal(other.get(), v)
    # h5py reads it, and the attnphys attributes are there.
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "r") as f:
        assert f.attrs["attnphys_kind"] in (b"parameters", "parameters")
        assert np.array_equal(f["model/params"][()], v)
    # Truncated file: a Python exception, not a crash.
    data = open(path, "rb").read()
    cut = str(tmp_path / "cut.h5")
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(attnphys.Error):
        other.load(cut)
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_schedule_matches_formula():
    lrs = [attnphys.scheduled_lr("warmup_cosine", 1.0, t, warmup_steps=5, total_steps=25) for t in range(30)]
    assert lrs[4] == pytest.approx(1.0)
    assert lrs[15] == pytest.approx(0.5)
    assert lrs[25] == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(attnphys.Error):
        attnphys.scheduled_lr("warmup_cosine", 1.0, 0, warmup_steps=50, total_steps=10)


def test_thread_count_changes_nothing_but_speed():
    # attnphys.set_num_threads sets the host kernels' pool (under Kokkos Serial) and OpenBLAS, like
    # torch.set_num_threads; every index of our kernels does its own arithmetic, so they are bit-identical, and so
    # were OpenBLAS' AVX-512 kernels; its AVX2 ones (Haswell, Zen) split the work by thread and round a few entries
    # differently (~1e-7 relative), hence a float32 tolerance.
    from attnphys import nn
    saved = attnphys.get_num_threads()
    blas_before = attnphys.machine()["blas_threads"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 64, 3)).astype(np.float32)
    dy = rng.standard_normal((4, 64, 32)).astype(np.float32)
    outs = []
    try:
        for n in (1, 2, 3):
            attnphys.set_num_threads(n)
            assert attnphys.get_num_threads() == n  # on every backend: what set_num_threads set
            if attnphys.info()["default_execution_space"] == "Serial":
                assert attnphys.machine()["host_threads"] == n
            # d_model 32 over 2 heads: 16-float heads, the fused attention kernels
            enc = nn.EncoderF32(d_in=3, d_model=32, n_heads=2, n_layers=2, attention="tiled", max_len=64, seed=2)
            y = enc.forward(x)
            enc.zero_grad()
            enc.backward(dy)
            outs.append((y, enc.gradients()))
    finally:
        attnphys.set_num_threads(saved)
    # Saving and restoring is the identity (on an OpenMP build get_num_threads said 1 while OpenBLAS ran 2 threads, so
    # the restore left OpenBLAS on one thread and a later test's CLI-vs-Python bit-identity failed).
    assert attnphys.get_num_threads() == saved and attnphys.machine()["blas_threads"] == blas_before
    for y, g in outs[1:]:
        np.testing.assert_allclose(y, outs[0][0], rtol=0, atol=2e-6 * np.abs(outs[0][0]).max())
        np.testing.assert_allclose(g, outs[0][1], rtol=0, atol=2e-6 * np.abs(outs[0][1]).max())
    for bad in (0, -2, 100000):
        with pytest.raises(attnphys.Error, match="between 1 and 256"):
            attnphys.set_num_threads(bad)
