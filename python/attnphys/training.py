"""Training and evaluation of the heat-equation attention surrogate (the code behind `attnphys train heat`)."""
from ._core import training as _t

train_heat = _t.train_heat
evaluate_heat = _t.evaluate_heat
default_config = _t.default_config

__all__ = ["train_heat", "evaluate_heat", "default_config"]
