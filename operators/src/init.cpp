#include "attnphys/operators/init.hpp"

#include <cmath>

#include "attnphys/core/random.hpp"

namespace attnphys::ops {

template <class T>
void declare_linear(ParameterBuffer<T>& buf, InitPlan& plan, const std::string& prefix, long out, long in,
                    bool bias) {
  const double bound = 1.0 / std::sqrt(double(in));
  buf.add(prefix + "weight", {out, in}, true);
  plan.push_back({prefix + "weight", InitSpec::Kind::Uniform, bound});
  if (bias) {
    buf.add(prefix + "bias", {out}, false);
    plan.push_back({prefix + "bias", InitSpec::Kind::Uniform, bound});
  }
}

template <class T>
void declare_layernorm(ParameterBuffer<T>& buf, InitPlan& plan, const std::string& prefix, long d) {
  buf.add(prefix + "weight", {d}, false);
  buf.add(prefix + "bias", {d}, false);
  plan.push_back({prefix + "weight", InitSpec::Kind::Constant, 1.0});
  plan.push_back({prefix + "bias", InitSpec::Kind::Constant, 0.0});
}

template <class T>
void init_parameters(ParameterBuffer<T>& buf, const InitPlan& plan, std::uint64_t seed) {
  require(buf.allocated(), "init_parameters: allocate() the parameter buffer first");
  for (const auto& spec : plan) {
    auto v = buf.view1(spec.name, Slot::Params);
    std::uint64_t stream = 0;
    for (const auto& blk : buf.blocks()) {
      if (blk.name == spec.name) break;
      ++stream;
    }
    switch (spec.kind) {
      case InitSpec::Kind::Uniform: fill_uniform(v, seed, stream, -spec.a, spec.a); break;
      case InitSpec::Kind::Normal: fill_normal(v, seed, stream, 0.0, spec.a); break;
      case InitSpec::Kind::Constant: Kokkos::deep_copy(v, T(spec.a)); break;
    }
  }
}

template void declare_linear<float>(ParameterBuffer<float>&, InitPlan&, const std::string&, long, long, bool);
template void declare_linear<double>(ParameterBuffer<double>&, InitPlan&, const std::string&, long, long, bool);
template void declare_layernorm<float>(ParameterBuffer<float>&, InitPlan&, const std::string&, long);
template void declare_layernorm<double>(ParameterBuffer<double>&, InitPlan&, const std::string&, long);
template void init_parameters<float>(ParameterBuffer<float>&, const InitPlan&, std::uint64_t);
template void init_parameters<double>(ParameterBuffer<double>&, const InitPlan&, std::uint64_t);

}  // namespace attnphys::ops
