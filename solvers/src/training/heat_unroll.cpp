#include "heat_unroll.hpp"

#include "attnphys/core/error.hpp"
#include "heat_loss.hpp"

namespace attnphys::training {

namespace detail_unroll {
// s = a + b.
template <class T>
void add(const View1<T>& s, const View1<const T>& a, const View1<const T>& b) {
  Kokkos::parallel_for(
      "attnphys::unroll_add_gradients", Kokkos::RangePolicy<ExecSpace>(0, long(s.extent(0))),
      KOKKOS_LAMBDA(long i) { s(i) = a(i) + b(i); });
}
}  // namespace detail_unroll

template <class T>
double Unroller<T>::forward(const HeatSurrogate<T>& model, const ParameterBuffer<T>& params, const UnrollBatch<T>& b,
                            UnrollGrad mode, double mu, double sigma, double h1_weight, long mean_over) {
  const long K = long(b.targets.size()), tokens = b.batch * b.points;
  require(K >= 1, "unrolled training: no targets (the trajectory needs at least one)");
  require(long(b.input.extent(0)) == tokens, "unrolled training: the input holds ", b.input.extent(0),
          " values for ", b.batch, " samples of ", b.points, " points");
  for (const auto& t : b.targets)
    require(long(t.extent(0)) == tokens, "unrolled training: a target holds ", t.extent(0), " values, expected ",
            tokens);
  steps_ = K;
  tokens_ = tokens;
  mode_ = mode;
  const std::size_t n_caches = mode == UnrollGrad::Full ? std::size_t(K) : 1;
  if (caches_.size() < n_caches) caches_.resize(n_caches);
  if (long(pred_.size()) < K) pred_.resize(std::size_t(K)), dpred_.resize(std::size_t(K));
  const long base = mean_over > 0 ? mean_over : b.batch;
  // Full: the mean over the K steps of the batch means; Last: the last step's batch mean.
  const long denom = mode == UnrollGrad::Full ? K * base : base;
  step_loss_.assign(std::size_t(K), 0.0);
  double loss = 0;
  for (long j = 0; j < K; ++j) {
    auto& pj = pred_[std::size_t(j)];
    auto& dj = dpred_[std::size_t(j)];
    grow_view(pj, "attnphys::unroll_pred", tokens);
    grow_view(dj, "attnphys::unroll_dpred", tokens);
    SurrogateCache<T>& cache = caches_[mode == UnrollGrad::Full ? std::size_t(j) : 0];
    const ops::ConstVec<T> in = j == 0 ? b.input : ops::ConstVec<T>(pred_[std::size_t(j - 1)].data(), tokens);
    model.forward(pj, cache, in, b.extra, b.coords, b.batch, b.points, params, b.tau);
    const double lj = relative_loss<T>(dj, pj, b.targets[std::size_t(j)], b.batch, b.points, b.nx, b.ny, b.dim, mu,
                                       sigma, h1_weight, denom);
    step_loss_[std::size_t(j)] = mode == UnrollGrad::Full ? lj * double(K) : lj;
    if (mode == UnrollGrad::Full || j == K - 1) loss += lj;
  }
  return loss;
}

template <class T>
void Unroller<T>::backward(const HeatSurrogate<T>& model, const ParameterBuffer<T>& params) {
  require(steps_ >= 1, "unrolled training: backward before forward");
  const long K = steps_;
  if (mode_ == UnrollGrad::Last || K == 1) {  // the last application alone (its cache is the last one filled)
    model.backward(caches_[mode_ == UnrollGrad::Full ? std::size_t(K - 1) : 0], dpred_[std::size_t(K - 1)], params);
    return;
  }
  grow_view(g_, "attnphys::unroll_input_gradient", tokens_);
  grow_view(dsum_, "attnphys::unroll_output_gradient", tokens_);
  // Step K: its own loss gradient; the gradient reaching its input (= step K − 1's prediction) goes into g.
  model.backward(caches_[std::size_t(K - 1)], dpred_[std::size_t(K - 1)], params, g_);
  for (long j = K - 2; j >= 0; --j) {
    detail_unroll::add<T>(dsum_, dpred_[std::size_t(j)], g_);
    model.backward(caches_[std::size_t(j)], dsum_, params, j > 0 ? ops::Vec<T>(g_.data(), tokens_) : ops::Vec<T>());
  }
}

template class Unroller<float>;
template class Unroller<double>;

}  // namespace attnphys::training
