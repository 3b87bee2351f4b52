#!/usr/bin/env python3
"""Train the heat-equation attention surrogate through the Python bindings.

    PYTHONPATH=build/python /usr/bin/python3 python/scripts/train_heat.py --config configs/heat2d.toml \
        --set train.steps=500

Runs exactly the code of `attnphys train heat` (same config, same seed, same numbers) and prints the same summary.
"""
import argparse
import json

import attnphys.training


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="", help="TOML configuration (default: built-in defaults)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override one option")
    ap.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    a = ap.parse_args()
    r = attnphys.training.train_heat(a.config, a.set)
    if a.json:
        print(json.dumps(r))
    else:
        for k in ["test_rel_l2", "rollout10_rel_l2", "transfer_rel_l2", "train_seconds", "speedup_vs_solver"]:
            print(f"{k:24s} {r[k]}")


if __name__ == "__main__":
    main()
