#!/usr/bin/env python3
"""02 - Train an attention surrogate for a family of heat problems, from numpy arrays.

Each of 160 problems has its own random diffusivity kappa(x, y) on a periodic 16 x 16 grid; the targets
u(t + dt) come from attnphys.heat.solve (ADI). attnphys.operator.Surrogate is the model of `attnphys train heat`
(every grid point a token, kappa an extra input channel); Trainer runs the C++ training loop.

    PYTHONPATH=build/python /usr/bin/python3 examples/02_train_surrogate.py

Checks that the trained model beats the trivial prediction u(t + dt) = u(t) by a wide margin on held-out
problems, and that a saved model loads back and predicts the same numbers. A few seconds.
"""
import os
import sys
import tempfile

import numpy as np

import attnphys.heat
from attnphys.operator import Surrogate, Trainer

n, h, dt = 16, 1.0 / 16, 2e-3
u0 = attnphys.heat.initial_conditions((n, n), h, count=160, seed=1, length_scale=0.2)
kappa = np.stack([attnphys.heat.random_kappa((n, n), h, 0.3, 3.0, 0.3, seed=s) for s in range(160)])
u1 = np.stack([attnphys.heat.solve(u, dt, h, kappa=k) for u, k in zip(u0, kappa)])
train, val, test = slice(0, 128), slice(128, 144), slice(144, 160)

model = Surrogate("transformer", d_model=16, n_heads=2, d_ff=32, channels=("kappa",))


def progress(step, info):
    if step % 50 == 0:
        print(f"step {step}: training loss {info['loss']:.3e}, validation relative L2 {info['val_rel_l2']:.3e}")


trainer = Trainer(model, lr=3e-2, steps=200, batch=16, eval_every=50, callback=progress)
trainer.fit(u0[train], u1[train], channels={"kappa": kappa[train]},
            val=(u0[val], u1[val], {"kappa": kappa[val]}))

pred = model.predict(u0[test], kappa=kappa[test])  # [16, 16, 16], like the inputs
norm = np.linalg.norm(u1[test], axis=(1, 2))
err = (np.linalg.norm(pred - u1[test], axis=(1, 2)) / norm).mean()
trivial = (np.linalg.norm(u0[test] - u1[test], axis=(1, 2)) / norm).mean()
print(f"test relative L2 {err:.2e} against {trivial:.2e} for u(t) itself; {model.n_parameters} parameters")

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "surrogate.h5")
    model.save(path)
    same = np.array_equal(Surrogate.load(path).predict(u0[test], kappa=kappa[test]), pred)
print("saved and reloaded model predicts the same numbers:", same)

if not (np.isfinite(err) and err < 0.5 * trivial and same):
    print(f"FAILED: the surrogate's error {err:.2e} should be below half of {trivial:.2e}, and reload must match")
    sys.exit(1)
print("OK")
