#include "heat_eval.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "attnphys/core/comm.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/runtime.hpp"
#include "attnphys/solvers/training/heat_file_solver.hpp"
#include "attnphys/solvers/training/heat_fit.hpp"

namespace attnphys::training {

namespace detail_eval {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace detail_eval

double mean_rel_l2(const View2<double>& pred, const View2<double>& ref) {
  auto p = to_host(pred), r = to_host(ref);
  const long c = p.extent(0), m = p.extent(1);
  double s = 0;
  for (long i = 0; i < c; ++i) {
    double e2 = 0, t2 = 0;
    for (long j = 0; j < m; ++j) {
      const double e = p(i, j) - r(i, j);
      e2 += e * e;
      t2 += r(i, j) * r(i, j);
    }
    s += std::sqrt(e2 / (t2 > 0 ? t2 : 1.0));
  }
  return c ? s / c : 0.0;
}

View2<double> HeatEvaluator::predict(const View2<double>& inputs, long np, SurrogateCache<float>& cache,
                                     double tau) {
  return predict(inputs, View3<double>(), grid_coordinates(cfg_.data, np), cache, tau);
}

View2<double> HeatEvaluator::predict(const View2<double>& inputs, const View3<double>& extra,
                                     const View2<double>& coords_d, SurrogateCache<float>& cache, double tau) {
  HeatNormalisation norm;
  norm.mean = mu_;
  norm.std = sigma_;
  norm.channel_mean = ch_.mean;
  norm.channel_std = ch_.std;
  View1<double> taus("attnphys::eval_tau", inputs.extent(0));
  Kokkos::deep_copy(taus, tau);
  return predict_heat_surrogate(model_, params_, norm, inputs, extra, coords_d, taus, cache, 32);
}

namespace detail_eval {
// Rows `rows[i]` of a [count, ...] view, as a new view (device copies).
View2<double> pick_rows(const View2<double>& v, const std::vector<long>& rows) {
  View2<double> out("attnphys::rows", long(rows.size()), v.extent(1));
  for (std::size_t i = 0; i < rows.size(); ++i)
    Kokkos::deep_copy(Kokkos::subview(out, long(i), Kokkos::ALL), Kokkos::subview(v, rows[i], Kokkos::ALL));
  return out;
}
View3<double> pick_rows(const View3<double>& v, const std::vector<long>& rows) {
  View3<double> out("attnphys::rows", long(rows.size()), v.extent(1), v.extent(2));
  if (v.extent(2) == 0) return out;
  for (std::size_t i = 0; i < rows.size(); ++i)
    Kokkos::deep_copy(Kokkos::subview(out, long(i), Kokkos::ALL, Kokkos::ALL),
                      Kokkos::subview(v, rows[i], Kokkos::ALL, Kokkos::ALL));
  return out;
}
}  // namespace detail_eval

void HeatEvaluator::run_speed(HeatRunResult& res, const HeatPairs& test, double pred_seconds,
                              const HeatFileSolver* fsol, SurrogateCache<float>& cache) {
  using detail_eval::seconds_since;
  const auto& D = cfg_.data;
  const long rows = test.count;
  // The surrogate: the better of the evaluation's first (cold) prediction and one more (warm) run.
  {
    const auto t0 = std::chrono::steady_clock::now();
    predict(test.inputs, test.extra, test.coords, cache);
    Kokkos::fence();
    pred_seconds = std::min(pred_seconds, seconds_since(t0));
  }
  res.surrogate_ms_per_sample = 1e3 * pred_seconds / double(rows);
  const double target = res.test.rel_l2;
  // Which sample and snapshot each test row starts from (rows in the order of read_heat_pairs, one base horizon).
  std::vector<long> sample_of, k_of;
  long ref_steps = D.file.empty() ? D.reference_substeps : 0;
  std::string solver = D.dim == 1 ? "Crank–Nicolson" : D.dim == 2 ? "ADI (Peaceman–Rachford)" : "ADI (Douglas)";
  if (fsol) {
    HeatDataOptions Db = D;
    Db.horizons = {1.0};
    const long per = Db.pairs_per_sample(), first = D.n_train + D.n_val;
    for (long r = 0; r < rows; ++r) {
      sample_of.push_back(first + r / per);
      k_of.push_back(r % per);
      ref_steps = std::max(ref_steps, fsol->reference_steps(r % per, D.file_stride));
    }
    solver = fsol->method_name();
  }
  std::vector<heat::HeatProblem> problems;  // generated family: row r is test sample n_train + n_val + r
  if (!fsol && D.generated_family()) {
    for (long r = 0; r < rows; ++r) sample_of.push_back(D.n_train + D.n_val + r);
    problems = sample_problems(D, D.n, sample_of);
    if (D.law.enabled()) solver = "nonlinear " + solver + " with Picard correction";
    solver += " (one stepper per sample, its set-up timed)";
  }
  auto run = [&](long steps) {
    View2<double> u("attnphys::solver_u", rows, test.points);
    Kokkos::deep_copy(u, test.inputs);
    Kokkos::fence();
    const auto t0 = std::chrono::steady_clock::now();
    if (fsol)
      fsol->advance(u, sample_of, k_of, D.file_stride, steps);
    else if (D.generated_family())
      advance_reference(D, u, D.n, 1.0, steps, problems);
    else
      advance_reference(D, u, D.n, 1.0, steps);
    Kokkos::fence();
    SolverRun s;
    s.seconds = seconds_since(t0);
    s.rel_l2 = mean_rel_l2(u, test.targets);
    return s;
  };
  // Up to 4096 steps per horizon, or four times the reference's steps for long horizons.
  const long max_steps = std::max(4096L, 4 * ref_steps);
  EqualAccuracy eq = equal_accuracy_steps(run, target, max_steps);
  if (eq.reached) {  // the best of several timings (at least two, up to five while they total under 0.2 s)
    double total = eq.seconds;
    for (int rep = 0; rep < 4 && (rep == 0 || total < 0.2); ++rep) {
      const double t = run(eq.steps).seconds;
      eq.seconds = std::min(eq.seconds, t);
      total += t;
    }
  }
  speed_ = eq;
  res.solver_steps_equal_accuracy = eq.steps;
  res.solver_rel_l2_equal_accuracy = eq.rel_l2;
  res.solver_ms_per_sample = 1e3 * eq.seconds / double(rows);
  char line[640];
  if (!eq.reached) {
    std::snprintf(line, sizeof line, "speed against %s: %ld steps per horizon reach only %.3e, above the surrogate's "
                  "%.3e, so no equal-accuracy time is reported", solver.c_str(), eq.steps, eq.rel_l2, target);
    res.notes.push_back(line);
    res.surrogate_ms_per_sample = res.solver_ms_per_sample = 0;
    return;
  }
  res.speedup_vs_solver = res.solver_ms_per_sample / std::max(1e-12, res.surrogate_ms_per_sample);
  std::string fewer;  // the error one step fewer gives (always tried by the search)
  for (std::size_t i = 0; i < eq.tried.size(); ++i)
    if (eq.tried[i] == eq.steps - 1) {
      std::snprintf(line, sizeof line, ", %ld give %.3e", eq.steps - 1, eq.tried_rel_l2[i]);
      fewer = line;
    }
  const RuntimeInfo rt = runtime_info();
  std::string ref;
  if (ref_steps > 0) {
    // The targets are the same scheme at ref_steps: against them the solver's error vanishes there and, beyond,
    // tends to the targets' own time error, which twice the steps estimates. Equal accuracy means something only
    // well above it.
    const double own = run(2 * ref_steps).rel_l2;
    std::snprintf(line, sizeof line, "; the targets' reference took %ld, and %ld give %.2e (about the targets' own "
                  "time error%s)", ref_steps, 2 * ref_steps, own,
                  target < 3 * own ? ": the surrogate's error is close to it, so the comparison is limited by the "
                                     "targets' accuracy" : "");
    ref = line;
  }
  std::snprintf(line, sizeof line,
                "speed against %s at equal accuracy: %ld step(s) per horizon give %.3e <= the surrogate's %.3e%s%s; "
                "%.4g ms per sample against the surrogate's %.4g ms (%ld test pairs, this process: Kokkos %s with "
                "concurrency %d, BLAS threads %d): the %s is %.3gx faster",
                solver.c_str(), eq.steps, eq.rel_l2, target, fewer.c_str(), ref.c_str(), res.solver_ms_per_sample,
                res.surrogate_ms_per_sample, rows, rt.default_execution_space.c_str(), rt.concurrency,
                rt.blas_threads, res.speedup_vs_solver >= 1 ? "surrogate" : "solver",
                res.speedup_vs_solver >= 1 ? res.speedup_vs_solver : 1.0 / res.speedup_vs_solver);
  res.notes.push_back(line);
  if (fsol) res.notes.push_back("speed against " + solver + ": " + fsol->how());
}

void HeatEvaluator::run(HeatRunResult& res, const std::string& out_dir, const std::string& config_toml) {
  using detail_eval::pick_rows;
  using detail_eval::seconds_since;
  const auto& D = cfg_.data;
  const auto& E = cfg_.eval;
  SurrogateCache<float> cache;
  res.solver_physics = D.solver_physics;
  res.family = D.family_name();
  res.channels = D.channels;
  res.notes.clear();
  if (!D.solver_physics && D.info) res.notes.push_back(D.info->physics_note);
  if (!D.family_note.empty()) res.notes.push_back(D.family_note);
  const std::string why_skip = D.solver_physics ? "" : "the physics comes from the file, so there is no reference solver";

  // Test metrics at the training resolution, over one base horizon (every test pair of that horizon: several per
  // sample when a file holds more snapshots than one pair needs).
  HeatDataOptions Db = D;
  Db.horizons = {1.0};
  HeatPairs test = make_heat_pairs(Db, D.n_train + D.n_val, D.n_test, D.n);
  const long n_test_rows = test.count, per_sample = Db.pairs_per_sample();
  const long C = test.channels();
  const auto t_pred = std::chrono::steady_clock::now();
  View2<double> pred = predict(test.inputs, test.extra, test.coords, cache);
  Kokkos::fence();
  const double pred_seconds = seconds_since(t_pred);
  auto hp = to_host(pred), hr = to_host(test.targets), hi = to_host(test.inputs);
  const int nz = int(test.nz), ny = int(test.ny), nx = int(test.nx);
  std::vector<FieldMetrics> per;
  for (long s = 0; s < n_test_rows; ++s)
    per.push_back(nz > 1 ? field_metrics(&hp(s, 0), &hr(s, 0), nz, ny, nx) : field_metrics(&hp(s, 0), &hr(s, 0), ny, nx));
  res.test = mean_metrics(per);
  res.identity_rel_l2 = mean_rel_l2(test.inputs, test.targets);
  // Every trained horizon, when there are several.
  res.test_rel_l2_by_horizon.clear();
  if (D.horizons.size() > 1)
    for (double m : D.horizons) {
      HeatDataOptions Dm = D;
      Dm.horizons = {m};
      HeatPairs tm = make_heat_pairs(Dm, D.n_train + D.n_val, D.n_test, D.n);
      res.test_rel_l2_by_horizon.push_back(mean_rel_l2(predict(tm.inputs, tm.extra, tm.coords, cache, m), tm.targets));
    }

  // Autoregressive rollout from the first test samples' first inputs: against the reference solver (solver
  // physics, static channels), else along the file's own later snapshots.
  const long nr = std::min(E.rollout_samples, D.n_test);
  res.rollout.clear();
  bool static_channels = true;
  if (D.info)
    for (const auto& c : D.info->channels) static_channels = static_channels && !c.time_dependent;
  if (E.rollout_steps > 0 && D.solver_physics && static_channels) {
    std::vector<long> start(static_cast<std::size_t>(nr));
    for (long s = 0; s < nr; ++s) start[std::size_t(s)] = s * per_sample;
    View2<double> ref = pick_rows(test.inputs, start);
    const View3<double> ex = pick_rows(test.extra, start);
    View2<double> cur("attnphys::rollout_cur", nr, test.points);
    Kokkos::deep_copy(cur, ref);
    std::vector<long> sample_of;  // generated pairs: one per test sample
    for (long s = 0; s < nr; ++s) sample_of.push_back(D.n_train + D.n_val + s);
    const auto problems = sample_problems(D, D.n, sample_of);
    for (long k = 1; k <= E.rollout_steps; ++k) {
      advance_reference(D, ref, D.n, 1.0, D.reference_substeps, problems);
      cur = predict(cur, ex, test.coords, cache);
      res.rollout.push_back(mean_rel_l2(cur, ref));
    }
  } else if (E.rollout_steps > 0) {
    // Step j (1-based) starts from snapshot (j − 1)·stride, the row of that start, and ends at the row's target.
    const long stride = D.file_stride, avail = (D.file_nt - 1) / stride;
    const long steps = std::min(E.rollout_steps, avail);
    if (steps >= 2) {
      std::vector<long> rows(static_cast<std::size_t>(nr));
      for (long s = 0; s < nr; ++s) rows[std::size_t(s)] = s * per_sample;
      View2<double> cur = pick_rows(test.inputs, rows);
      for (long j = 1; j <= steps; ++j) {
        for (long s = 0; s < nr; ++s) rows[std::size_t(s)] = s * per_sample + (j - 1) * stride;
        cur = predict(cur, pick_rows(test.extra, rows), test.coords, cache);
        res.rollout.push_back(mean_rel_l2(cur, pick_rows(test.targets, rows)));
      }
      if (steps < E.rollout_steps)
        res.notes.push_back("rollout: " + std::to_string(steps) + " of eval.rollout_steps = " +
                            std::to_string(E.rollout_steps) + " horizons, along the file's own snapshots (" +
                            std::to_string(D.file_nt) + " per sample)");
    } else {
      res.notes.push_back("rollout skipped: " + why_skip + ", and data.file holds " + std::to_string(D.file_nt) +
                          " snapshots per sample, too few for a rollout of 2 horizons along them");
    }
  }

  // Resolution transfer: the same physical fields on a finer grid.
  if (E.transfer_n > 0 && (!D.solver_physics || (C > 0 && !D.generated_family()))) {
    res.notes.push_back("resolution transfer skipped: " +
                        (D.solver_physics ? std::string("the generated fields of the finer grid have no extra "
                                                        "channels (data.channels)")
                                          : why_skip + " to generate the finer grid's fields"));
  } else if (E.transfer_n > 0) {
    const long ns = std::min(E.transfer_samples, D.n_test);
    HeatPairs fine = generate_heat_pairs(Db, D.n_train + D.n_val, ns, E.transfer_n);
    View2<double> fp = predict(fine.inputs, fine.extra, fine.coords, cache);  // the family's channels on that grid
    auto fph = to_host(fp), frh = to_host(fine.targets);
    std::vector<FieldMetrics> fm;
    const int fny = D.dim == 1 ? 1 : int(E.transfer_n), fnz = D.dim == 3 ? int(E.transfer_n) : 1;
    for (long s = 0; s < ns; ++s)
      fm.push_back(fnz > 1 ? field_metrics(&fph(s, 0), &frh(s, 0), fnz, fny, int(E.transfer_n))
                           : field_metrics(&fph(s, 0), &frh(s, 0), fny, int(E.transfer_n)));
    res.transfer = mean_metrics(fm);
  }

  // Speed against the solver at equal accuracy: the fewest ADI/CN steps per horizon whose mean relative L2 against
  // the test targets is no larger than the surrogate's (equal_accuracy_steps: doubling, then bisection), timed on
  // the same test pairs, in this process (same threads). Solver physics: one stepper for the batch. Our own family
  // files: each test sample's problem rebuilt from the file (HeatFileSolver; exact from its config when it
  // reproduces the file), one stepper per sample, the nonlinear scheme for a κ(u) law.
  if (E.speed) {
    std::unique_ptr<HeatFileSolver> fsol;
    std::string why;
    if (!D.solver_physics) {
      if (!D.info || !D.info->attnphys)
        why = "not written by `attnphys heat dataset`";
      else if (!D.info->field.solved_field())
        why = "data.field = '" + D.info->field.spec.text() + "' is not the solved field 'data'";
      else
        try {
          fsol = std::make_unique<HeatFileSolver>(D.file, D.n_train + D.n_val, D.n_test);
        } catch (const Error& e) {
          why = e.what();
        }
    }
    if (!D.solver_physics && !fsol) {
      res.notes.push_back("speed against ADI skipped: " + why_skip + " to time (" + why + ")");
    } else {
      run_speed(res, test, pred_seconds, fsol.get(), cache);
    }
  }

  // Attention map of the central query, beside the exact heat kernel and the solver's own response.
  const long P = test.points;
  const long qx = nx / 2, qy = D.dim > 1 ? ny / 2 : 0, qz = D.dim > 2 ? nz / 2 : 0, q = (qz * ny + qy) * nx + qx;
  predict(pick_rows(test.inputs, {0L}), pick_rows(test.extra, {0L}), test.coords, cache);
  std::vector<double> att = model_.attention_map(cache, params_, E.attention_layer, 0, q);
  const std::vector<double> op_row = model_.operator_row(cache, params_, q);
  std::vector<double> kern, stencil;
  if (!D.solver_physics || D.generated_family()) {
    res.notes.push_back("heat-kernel comparison skipped: " +
                        (D.solver_physics ? std::string("every sample has its own problem (") + res.family + ")"
                                          : why_skip) +
                        " and no known heat kernel");
  } else {
    kern.resize(std::size_t(P));
    stencil.resize(std::size_t(P));
    const long n = D.n;
    const double L = D.length, s2 = 2 * D.kappa * D.horizon();  // variance of the heat kernel per axis
    const auto prob = D.problem(n);
    double tot = 0;
    for (long p = 0; p < P; ++p) {
      double w = 1;
      for (int a = 0; a < D.dim; ++a) {
        const long i = a == 0 ? p % n : (a == 1 ? (p / n) % n : p / (n * n)), iq = a == 0 ? qx : (a == 1 ? qy : qz);
        double dx = prob.coord(a, i) - prob.coord(a, iq);
        double g = 0;  // periodic images
        for (int img = -2; img <= 2; ++img) g += std::exp(-(dx + img * L) * (dx + img * L) / (2 * s2));
        w *= g;
      }
      kern[p] = w;
      tot += w;
    }
    for (auto& w : kern) w /= tot;
    View2<double> delta("attnphys::delta", 1, P);
    Kokkos::deep_copy(Kokkos::subview(delta, 0, q), 1.0);
    advance_reference(D, delta, n, 1.0, D.reference_substeps);
    auto dh = to_host(delta);
    double st = 0;
    for (long p = 0; p < P; ++p) st += dh(0, p);
    for (long p = 0; p < P; ++p) stencil[p] = dh(0, p) / (st != 0 ? st : 1.0);
    // How much of the heat kernel's mass the learned map shares: the operator row when the model is one linear
    // attention operator (its sum need not be 1; it is compared as it is), else the head-averaged weights.
    const std::vector<double>& learned = op_row.empty() ? att : op_row;
    double overlap = 0;
    for (long p = 0; p < P; ++p) overlap += std::min(std::max(learned[p], 0.0), kern[p]);
    res.attention_kernel_overlap = overlap;
  }

  if (!comm_.is_root()) return;
  namespace fs = std::filesystem;
  {
    h5::Writer w((fs::path(out_dir) / "eval.h5").string(), "heat_eval", 1);
    const long ns = std::min<long>(4, n_test_rows);
    const std::uint64_t snz = std::uint64_t(nz), sny = std::uint64_t(ny), snx = std::uint64_t(nx),
                        sns = std::uint64_t(ns);
    // Fields [sample, ny, nx] (3D: [sample, nz, ny, nx]); one field [ny, nx] (3D: [nz, ny, nx]).
    const std::vector<std::uint64_t> fshape = nz > 1 ? std::vector<std::uint64_t>{sns, snz, sny, snx}
                                                     : std::vector<std::uint64_t>{sns, sny, snx};
    const std::vector<std::uint64_t> oshape = nz > 1 ? std::vector<std::uint64_t>{snz, sny, snx}
                                                     : std::vector<std::uint64_t>{sny, snx};
    w.write<double>("/fields/input", &hi(0, 0), fshape);
    w.write<double>("/fields/prediction", &hp(0, 0), fshape);
    w.write<double>("/fields/reference", &hr(0, 0), fshape);
    if (C > 0) {  // the extra input channels of the same samples, raw (κ, source, boundary data)
      auto he = to_host(test.extra);
      const long P = test.points;
      for (long c = 0; c < C; ++c) {
        std::vector<double> v(std::size_t(ns * P));
        for (long s = 0; s < ns; ++s)
          for (long q = 0; q < P; ++q) v[std::size_t(s * P + q)] = he(s, q, c);
        const std::string name = c < long(D.channels.size()) ? D.channels[std::size_t(c)] : "channel" + std::to_string(c);
        std::string safe;
        for (char ch : name) safe += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
        w.write<double>("/fields/channels/" + safe, v.data(), fshape);
      }
    }
    if (!res.rollout.empty()) w.write<double>("/rollout/rel_l2", res.rollout);
    if (!speed_.tried.empty()) {  // every step count the speed comparison ran, in order
      std::vector<double> steps(speed_.tried.begin(), speed_.tried.end()), ms;
      for (double sec : speed_.tried_seconds) ms.push_back(1e3 * sec / double(n_test_rows));
      w.write<double>("/speed/steps", steps);
      w.write<double>("/speed/rel_l2", speed_.tried_rel_l2);
      w.write<double>("/speed/solver_ms_per_sample", ms);
      w.set_attr("/speed", "surrogate_rel_l2", res.test.rel_l2);
      w.set_attr("/speed", "surrogate_ms_per_sample", res.surrogate_ms_per_sample);
    }
    w.write<double>("/attention/weights", att.data(), oshape);
    if (!op_row.empty()) w.write<double>("/attention/operator", op_row.data(), oshape);
    if (!kern.empty()) {
      w.write<double>("/attention/heat_kernel", kern.data(), oshape);
      w.write<double>("/attention/stencil", stencil.data(), oshape);
      w.set_attr("/attention", "kernel_width", std::sqrt(2 * D.kappa * D.horizon()));
    }
    w.set_attr("/attention", "query", nz > 1 ? std::vector<double>{double(qz), double(qy), double(qx)}
                                             : std::vector<double>{double(qy), double(qx)});
    if (!metric_columns_.empty() && !metric_rows_.empty()) {
      const std::uint64_t nc = metric_columns_.size(), nr = metric_rows_.size() / nc;
      w.write<double>("/metrics/table", metric_rows_.data(), {nr, nc});
      std::string names;
      for (const auto& c : metric_columns_) names += (names.empty() ? "" : ",") + c;
      w.set_attr("/metrics/table", "columns", names);
    }
    w.set_attr("/", "config", config_toml);
    w.set_attr("/", "physics", std::string(D.solver_physics ? "solver" : "file"));
    if (!res.notes.empty()) {
      std::string all;
      for (const auto& nt : res.notes) all += (all.empty() ? "" : "\n") + nt;
      w.set_attr("/", "notes", all);
    }
    w.commit();
  }
  const std::string summary = (fs::path(out_dir) / "summary.json").string();
  {
    std::ofstream f(summary + ".tmp");
    f << res.to_json().dump() << "\n";
  }
  fs::rename(summary + ".tmp", summary);
}

Json HeatRunResult::to_json() const {
  Json j = Json::object();
  j.set("test_rel_l2", test.rel_l2).set("test_nrmse", test.nrmse).set("test_rmse", test.rmse);
  j.set("test_max_err", test.max_err).set("test_brmse", test.brmse).set("test_crmse", test.crmse);
  j.set("identity_rel_l2", identity_rel_l2);
  j.set("test_frmse_low", test.frmse_low).set("test_frmse_mid", test.frmse_mid).set("test_frmse_high", test.frmse_high);
  j.set("rollout10_rel_l2", rollout.size() >= 10 ? Json(rollout[9]) : Json());
  j.set("rollout20_rel_l2", rollout.size() >= 20 ? Json(rollout[19]) : Json());
  j.set("rollout_rel_l2", rollout);
  j.set("transfer_rel_l2", transfer.rel_l2);
  j.set("test_rel_l2_by_horizon", test_rel_l2_by_horizon);
  j.set("train_seconds", train_seconds).set("steps", steps_done).set("stopped_early", stopped_early)
      .set("stopped_at_time_limit", stopped_at_time_limit);
  j.set("final_train_loss", final_train_loss).set("best_val_rel_l2", best_val_rel_l2);
  j.set("n_parameters", n_parameters);
  j.set("surrogate_ms_per_sample", surrogate_ms_per_sample).set("solver_ms_per_sample", solver_ms_per_sample);
  j.set("solver_steps_equal_accuracy", solver_steps_equal_accuracy);
  j.set("solver_rel_l2_equal_accuracy", solver_rel_l2_equal_accuracy);
  j.set("speedup_vs_solver", speedup_vs_solver);
  j.set("attention_kernel_overlap", solver_physics && attention_kernel_overlap > 0 ? Json(attention_kernel_overlap) : Json());
  j.set("family", family);
  Json chs = Json::array();
  for (const auto& c : channels) chs.push_back(c);
  j.set("channels", chs);
  if (!(speedup_vs_solver > 0))  // not timed (eval.speed off, no solver for the file's physics, or not reached)
    for (const char* k : {"surrogate_ms_per_sample", "solver_ms_per_sample", "solver_steps_equal_accuracy",
                          "solver_rel_l2_equal_accuracy", "speedup_vs_solver"})
      j.set(k, Json());
  if (!solver_physics) j.set("transfer_rel_l2", Json());  // not transferred
  j.set("physics", solver_physics ? "solver" : "file");
  Json nts = Json::array();
  for (const auto& n : notes) nts.push_back(n);
  j.set("notes", nts);
  j.set("checkpoint", checkpoint);
  return j;
}

std::string HeatRunResult::table() const {
  std::ostringstream os;
  char line[160];
  auto row = [&](const char* name, double v) {
    std::snprintf(line, sizeof line, "  %-34s %12.4e\n", name, v);
    os << line;
  };
  if (!family.empty()) os << "problem family: " << family << "\n";
  os << "heat surrogate — test set (" << n_parameters << " parameters, " << steps_done << " steps, "
     << train_seconds << " s training)\n";
  row("relative L2", test.rel_l2);
  row("nRMSE", test.nrmse);
  row("RMSE", test.rmse);
  row("max error", test.max_err);
  row("boundary RMSE", test.brmse);
  row("conserved-quantity RMSE (cRMSE)", test.crmse);
  row("fRMSE low (k < 4)", test.frmse_low);
  row("fRMSE mid (4 <= k < 12)", test.frmse_mid);
  row("fRMSE high (k >= 12)", test.frmse_high);
  for (std::size_t i = 0; i < test_rel_l2_by_horizon.size(); ++i)
    row(("relative L2, data.horizons[" + std::to_string(i) + "]").c_str(), test_rel_l2_by_horizon[i]);
  if (rollout.size() >= 10) row("rollout relative L2 after 10 steps", rollout[9]);
  if (rollout.size() >= 20) row("rollout relative L2 after 20 steps", rollout[19]);
  if (transfer.rel_l2 > 0) row("relative L2 on the transfer grid", transfer.rel_l2);
  if (speedup_vs_solver > 0) {
    row("surrogate ms / sample", surrogate_ms_per_sample);
    row("solver ms / sample at equal accuracy", solver_ms_per_sample);
    row("solver steps / horizon at equal acc.", double(solver_steps_equal_accuracy));
    row("speed-up vs solver at equal accuracy", speedup_vs_solver);
  }
  if (solver_physics && attention_kernel_overlap > 0) row("attention / heat-kernel overlap", attention_kernel_overlap);
  for (const auto& n : notes) os << "  note: " << n << "\n";
  return os.str();
}

}  // namespace attnphys::training
