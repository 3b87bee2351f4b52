#pragma once
// Parameter initialisation plans: a module records how each of its blocks starts (PyTorch's defaults) when it
// declares them, and init_parameters() fills the buffer deterministically from one seed (stream = block index),
// so the same seed gives the same model on every backend and thread count.
#include <cstdint>
#include <string>
#include <vector>

#include "attnphys/core/params.hpp"

namespace attnphys::ops {

struct InitSpec {
  enum class Kind { Uniform, Normal, Constant };
  std::string name;
  Kind kind = Kind::Constant;
  double a = 0.0;  // uniform: half-width; normal: std; constant: value
};
using InitPlan = std::vector<InitSpec>;

// Declares a [out, in] weight and an [out] bias named prefix + "weight" / "bias" with nn.Linear's default init
// U(-1/sqrt(in), 1/sqrt(in)).
template <class T>
void declare_linear(ParameterBuffer<T>& buf, InitPlan& plan, const std::string& prefix, long out, long in,
                    bool bias = true);
// Declares a LayerNorm's weight (ones) and bias (zeros) of length d, excluded from weight decay.
template <class T>
void declare_layernorm(ParameterBuffer<T>& buf, InitPlan& plan, const std::string& prefix, long d);

template <class T>
void init_parameters(ParameterBuffer<T>& buf, const InitPlan& plan, std::uint64_t seed);

}  // namespace attnphys::ops
