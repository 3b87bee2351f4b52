"""attnphys.spin.Mps: log psi against explicit matrix products, and an MPS saved by DMRG reproducing its energy."""
import numpy as np

from attnphys import mps, spin


def test_mps_ansatz_products_and_dmrg_energy(tmp_path):
    n = 6
    psi = spin.Mps(n, chi=3, init_std=0.5, seed=4)
    d = psi.bond_dimensions
    assert d == [1, 2, 3, 3, 3, 2, 1]
    theta = psi.get_parameters()
    assert psi.n_parameters == sum(2 * d[i] * d[i + 1] for i in range(n))
    states = spin.all_states(n)
    blocks = {b["name"]: b for b in psi.parameter_blocks()}
    amps = []
    for s in states:
        p = np.eye(1)
        for i in range(n):
            b = blocks[f"A{i}"]
            a = theta[b["offset"]:b["offset"] + 2 * d[i] * d[i + 1]].reshape(2, d[i], d[i + 1])
            p = p @ a[0 if s[i] > 0 else 1]
        amps.append(p[0, 0])
    amps = np.array(amps)
    assert (amps < 0).any()
    assert np.allclose(psi.log_psi(states), np.log(amps.astype(complex)), atol=1e-12)

    # A truncated (chi = 4) DMRG ground state of a 10-site Heisenberg chain, copied into the ansatz: the VMC energy
    # over all configurations is the DMRG energy.
    path = str(tmp_path / "gs.h5")
    m = spin.ChainModel("heisenberg", n=10, bc="open")
    r = mps.dmrg(model="heisenberg", n=10, bc="open", chi=4, sweeps=8, save=path)
    ans = spin.Mps.from_file(path)
    states = spin.all_states(10)
    lp = ans.log_psi(states)
    keep = np.isfinite(lp.real)
    w = np.exp(2 * lp.real[keep])
    e = ans.local_energies(m, states[keep]).real
    assert abs((w @ e) / w.sum() - r["energy"]) < 1e-10 * abs(r["energy"])
    assert r["energy"] > spin.exact_ground_state(m)["energy"] + 1e-6  # truncated: above the exact energy
