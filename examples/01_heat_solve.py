#!/usr/bin/env python3
"""01 - Solve the heat equation and check it against the exact solution.

u_t = kappa u_xx on the periodic unit interval (and u_t = kappa (u_xx + u_yy) on the unit square), starting from a
single Fourier mode, whose exact solution decays as exp(-kappa |k|^2 t). attnphys.heat.solve runs Crank-Nicolson
in 1D and Peaceman-Rachford ADI in 2D; both are second order, so halving the grid spacing divides the error by 4.

    PYTHONPATH=build/python /usr/bin/python3 examples/01_heat_solve.py

Exits non-zero if the error or the observed order is off.
"""
import sys

import numpy as np

import attnphys.heat

kappa, t_end = 0.5, 0.05
failures = []


def exact_1d(n):
    x = np.arange(n) / n
    k = 2 * np.pi
    return np.sin(k * x), np.exp(-kappa * k * k * t_end) * np.sin(k * x)


def exact_2d(n):
    x = np.arange(n) / n
    X, Y = np.meshgrid(x, x)  # arrays are [ny, nx], the last axis x
    kx, ky = 2 * np.pi, 4 * np.pi
    u0 = np.sin(kx * X) * np.cos(ky * Y)
    return u0, np.exp(-kappa * (kx * kx + ky * ky) * t_end) * u0


for dim, exact, method, tol in ((1, exact_1d, "cn", 1e-3), (2, exact_2d, "adi", 1e-2)):
    errors = []
    for n in (16, 32, 64):
        u0, u_exact = exact(n)
        # dt tied to the grid (dt ~ dx) so space and time errors fall together at second order
        u = attnphys.heat.solve(u0, t_end, 1.0 / n, kappa=kappa, bc="periodic", method=method, dt=0.1 / n)
        errors.append(np.linalg.norm(u - u_exact) / np.linalg.norm(u_exact))
    orders = [np.log2(errors[i] / errors[i + 1]) for i in range(len(errors) - 1)]
    print(f"{dim}D {method}: relative L2 error at n = 16, 32, 64: "
          + ", ".join(f"{e:.2e}" for e in errors) + "; observed order " + ", ".join(f"{p:.2f}" for p in orders))
    if errors[-1] > tol:
        failures.append(f"{dim}D error {errors[-1]:.2e} at n = 64 is above {tol:g}")
    if not all(1.8 < p < 2.3 for p in orders):
        failures.append(f"{dim}D observed order {orders} is not 2")

if failures:
    print("FAILED: " + "; ".join(failures))
    sys.exit(1)
print("OK: second-order convergence to the exact solution")
