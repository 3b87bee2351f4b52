// attnphys._core.surrogate: the heat surrogate as an object (training::HeatModel) for attnphys.operator. Fields
// cross as float64 numpy arrays [samples, points] (points row-major, x fastest), extra channels as
// [samples, points, C], coordinates as [points, dim]; attnphys/operator.py checks and reshapes what the user gives.
// Training runs in C++ (training::fit_heat_surrogate, the loop of `attnphys train heat`) with the GIL released;
// the progress callback takes the GIL for each step, and an exception it raises (or Ctrl-C) stops the loop and
// reaches the caller unchanged.
#include <Kokkos_Core.hpp>

#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "attnphys/solvers/training/heat_fit.hpp"
#include "bindings.hpp"

namespace attnphys::python {

namespace {

using training::HeatModel;
using training::HeatPairs;

// "model.d_model" = 64 etc.: typed Python values applied through the options' own declarations (ranges, choices).
void apply_options(OptionSet& set, const py::dict& values) {
  for (auto item : values) {
    const std::string key = py::str(item.first);
    const py::handle v = item.second;
    std::string text;
    if (py::isinstance<py::bool_>(v)) {
      text = v.cast<bool>() ? "true" : "false";
    } else if (py::isinstance<py::int_>(v)) {
      text = std::to_string(v.cast<long long>());
    } else if (py::isinstance<py::float_>(v)) {
      const double x = v.cast<double>();
      require(std::isfinite(x), "option '", key, "' = ", x, " is not a finite number");
      text = py::str(py::repr(v));
      if (text.find_first_of(".eE") == std::string::npos) text += ".0";
    } else if (py::isinstance<py::str>(v)) {
      text = py::module_::import("json").attr("dumps")(v).cast<std::string>();
    } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      text = "[";
      for (auto e : v) {
        text += text.size() > 1 ? ", " : "";
        if (py::isinstance<py::str>(e))
          text += py::module_::import("json").attr("dumps")(e).cast<std::string>();
        else
          text += py::str(py::repr(py::float_(e.cast<double>())));
      }
      text += "]";
    } else {
      fail("option '", key, "': unsupported value type ", std::string(py::str(v.get_type())));
    }
    set.set(key + "=" + text);
  }
}

training::SurrogateOptions surrogate_options(const py::dict& values) {
  training::SurrogateOptions o;
  OptionSet set;
  o.declare(set);
  apply_options(set, values);
  return o;
}

training::TrainOptions train_options(const py::dict& values) {
  training::TrainOptions o;
  OptionSet set;
  o.declare(set);
  apply_options(set, values);
  if (!set.was_set("schedule.total_steps")) o.schedule.total_steps = o.steps;
  if (!set.was_set("schedule.warmup_steps")) o.schedule.warmup_steps = std::min(o.schedule.warmup_steps, o.steps / 10);
  o.progress = false;
  o.validate();
  return o;
}

// Pairs from arrays: inputs [S, P], targets [S, P] or trajectories [S, K, P] (targets[:, j] the field j + 1 horizons
// on: HeatPairs::later for train.unroll), coords [P, dim], extra [S, P, C] (C = 0: None), tau [S] (None: 1). The
// checks are the entry layer's (attnphys/solvers/entry/arrays.hpp), which the fuzz target fuzz_arrays drives.
HeatPairs make_pairs(const Array<double>& inputs, const py::object& targets, const Array<double>& coords, long nx,
                     long ny, long nz, int dim, const py::object& extra, const py::object& tau, long channels) {
  const HeldArray t(targets), e(channels > 0 ? extra : py::none()), ta(tau);
  return entry::heat_pairs(host_array(inputs), t.host, host_array(coords), nx, ny, nz, dim, e.host, ta.host,
                           channels);
}

py::dict to_dict(const training::SurrogateOptions& o) {
  py::dict d;
  d["kind"] = std::string(enum_name(o.kind));
  d["kernel_heads"] = o.kernel_heads;
  d["kernel_dk"] = o.kernel_dk;
  d["local_radius"] = o.local_radius;
  d["local_edge"] = std::string(enum_name(o.local_edge));
  d["channel_window"] = o.channel_window;
  d["layer_repeat"] = o.layer_repeat;
  d["kernel_layers"] = o.kernel_layers;
  d["d_model"] = o.encoder.d_model;
  d["n_heads"] = o.encoder.n_heads;
  d["n_layers"] = o.encoder.n_layers;
  d["d_ff"] = o.encoder.d_ff;
  d["attention"] = enum_name(o.encoder.attention);
  d["n_slices"] = o.encoder.n_slices;
  d["coords"] = std::string(enum_name(o.coords));
  d["harmonics"] = o.harmonics;
  d["coord_features"] = o.encoder.coord_features;
  d["coord_sigma"] = o.encoder.coord_sigma;
  d["dt_input"] = o.dt_input;
  d["final_norm"] = o.encoder.final_norm;
  d["stencil"] = o.stencil;
  d["conserve"] = o.conserve;
  d["condition_on_field"] = o.condition_on_field;
  d["attention_precision"] = std::string(enum_name(o.attention_precision));
  return d;
}

py::dict train_defaults() {
  training::TrainOptions t;
  py::dict d;
  d["steps"] = t.steps;
  d["batch"] = t.batch;
  d["eval_every"] = t.eval_every;
  d["patience"] = t.patience;
  d["h1_weight"] = t.h1_weight;
  d["seed"] = t.seed;
  d["max_seconds"] = t.max_seconds;
  d["unroll"] = t.unroll;
  d["unroll_grad"] = std::string(enum_name(t.unroll_grad));
  d["unroll_warmup_steps"] = t.unroll_warmup_steps;
  d["optimizer"] = std::string(enum_name(t.optimizer.kind));
  d["lr"] = t.optimizer.lr;
  d["weight_decay"] = t.optimizer.weight_decay;
  d["clip_norm"] = t.optimizer.clip_norm;
  d["schedule"] = std::string(enum_name(t.schedule.kind));
  d["warmup_steps"] = t.schedule.warmup_steps;
  d["min_lr_ratio"] = t.schedule.min_lr_ratio;
  return d;
}

// A HeatModel owned by Python.
struct PyModel {
  std::unique_ptr<HeatModel> m;
  bool fitting = false;
  LiveToken token;
};

// One lock for every model: the GIL is released while a model works, and Kokkos' host execution spaces are not
// safe to launch into from several threads at once, so calls from several Python threads run one after the other.
// Recursive: a progress callback may call predict (of any model) from inside a fit. Taken with the GIL released
// (a thread that holds the lock may be waiting for the GIL in a callback).
std::unique_lock<std::recursive_mutex> lock_model(PyModel&) {
  static std::recursive_mutex mu;
  std::unique_lock<std::recursive_mutex> lock(mu, std::defer_lock);
  py::gil_scoped_release release;
  lock.lock();
  return lock;
}

// Marks a fit in progress (a callback that starts another fit on the same model is refused).
struct Fitting {
  PyModel& p;
  explicit Fitting(PyModel& pm) : p(pm) {
    require(!p.fitting, "fit: this model is already being trained (a progress callback cannot start another fit of ",
            "the same model)");
    p.fitting = true;
  }
  ~Fitting() { p.fitting = false; }
};

// The progress of a fit: every step recorded, the Python callback called with the GIL held.
struct FitRun {
  std::vector<double> step, loss, lr, grad_norm, seconds, val_step, val;
  const py::object* callback = nullptr;
  training::FitHooks hooks() {
    training::FitHooks h;
    h.on_step = [this](const training::FitStep& s) {
      step.push_back(double(s.step));
      loss.push_back(s.loss);
      lr.push_back(s.lr);
      grad_norm.push_back(s.grad_norm);
      seconds.push_back(s.seconds);
      if (!std::isnan(s.val_rel_l2)) {
        val_step.push_back(double(s.step));
        val.push_back(s.val_rel_l2);
      }
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C
      if (callback && !callback->is_none()) {
        py::dict info;
        info["loss"] = s.loss;
        info["lr"] = s.lr;
        info["grad_norm"] = s.grad_norm;
        info["seconds"] = s.seconds;
        info["val_rel_l2"] = std::isnan(s.val_rel_l2) ? py::object(py::none()) : py::object(py::float_(s.val_rel_l2));
        info["best_val_rel_l2"] =
            std::isnan(s.best_val_rel_l2) ? py::object(py::none()) : py::object(py::float_(s.best_val_rel_l2));
        (*callback)(s.step, info);
      }
    };
    h.diverged_hint = [] { return std::string("Lower lr= or set clip_norm= in the Trainer."); };
    return h;
  }
  py::dict history(const training::FitResult& r, const HeatModel& m) const {
    py::dict d;
    d["step"] = step;
    d["loss"] = loss;
    d["lr"] = lr;
    d["grad_norm"] = grad_norm;
    d["seconds"] = seconds;
    d["val_step"] = val_step;
    d["val_rel_l2"] = val;
    d["steps"] = r.steps_done;
    d["stopped_early"] = r.stopped_early;
    d["stopped_at_time_limit"] = r.stopped_at_time_limit;
    d["train_seconds"] = r.train_seconds;
    d["final_loss"] = r.final_loss;
    const double best = m.state().best_val;
    d["best_val_rel_l2"] = std::isfinite(best) ? py::object(py::float_(best)) : py::object(py::none());
    return d;
  }
};

py::dict fit_arrays(PyModel& pm, const py::dict& train, const py::object& val, const py::dict& options,
                    const py::object& callback, bool restore_best) {
  HeatModel& m = *pm.m;
  const long C = long(m.channel_names().size());
  auto pairs = [&](const py::dict& d) {
    return make_pairs(d["inputs"].cast<Array<double>>(), d["targets"], d["coords"].cast<Array<double>>(),
                      d["nx"].cast<long>(), d["ny"].cast<long>(), d.contains("nz") ? d["nz"].cast<long>() : 1L,
                      m.grid().dim, d["channels"], d["tau"], C);
  };
  const auto topt = train_options(options);
  auto lock = lock_model(pm);
  Fitting busy(pm);
  const HeatPairs tr = pairs(train);
  const HeatPairs va = val.is_none() ? HeatPairs{} : pairs(val.cast<py::dict>());
  FitRun run;
  run.callback = &callback;
  training::FitResult r;
  {
    py::gil_scoped_release release;
    r = m.fit(tr, va, topt, run.hooks(), restore_best);
  }
  return run.history(r, m);
}

py::dict fit_file(PyModel& pm, const std::string& path, const std::string& field,
                  const std::vector<std::string>& channels, long n_train, long n_val,
                  const std::vector<double>& horizons, long file_stride, const py::dict& options,
                  const py::object& callback, bool restore_best) {
  HeatModel& m = *pm.m;
  const auto& g = m.grid();
  const auto topt = train_options(options);
  training::HeatDataOptions o;
  o.file = path;
  o.field = field;
  o.channels = channels;
  o.dim = g.dim;
  o.bc = g.bc;
  o.n = 0;
  o.horizons = horizons;
  o.file_stride = file_stride;
  auto lock = lock_model(pm);
  Fitting busy(pm);
  HeatPairs tr, va;
  training::HeatDataOptions r;
  {
    py::gil_scoped_release release;
    o.validate();
    const training::HeatFileInfo f = training::inspect_heat_file(o);
    require(f.dim == g.dim, "fit('", path, "'): the file holds ", f.dim, "D fields but the model is ", g.dim,
            "D: build it with Surrogate(dim=", f.dim, ")");
    r = training::resolve_heat_file(o);
    require(r.bc == g.bc, "fit('", path, "'): the file's boundary type is ", enum_name(r.bc),
            " but the model was built with bc='", enum_name(g.bc), "': build it with Surrogate(bc='", enum_name(r.bc),
            "')");
    const std::vector<double> box = r.box();
    bool same = true;
    for (int a = 0; a < g.dim; ++a) same = same && std::abs(box[a] - g.box[a]) <= 1e-5 * g.box[a];
    auto num = [](double v) {
      std::ostringstream os;
      os << v;
      return os.str();
    };
    require(same, "fit('", path, "'): the file's box is ", num(box[0]), g.dim > 1 ? " x " + num(box[1]) : "",
            " (from its coordinates) but the model was built with lengths=(", num(g.box[0]),
            g.dim > 1 ? ", " + num(g.box[1]) : std::string(","), "): build it with Surrogate(lengths=(", num(box[0]),
            g.dim > 1 ? ", " + num(box[1]) : std::string(","), "))");
    const long samples = f.samples;
    if (n_val < 0) n_val = n_train >= 0 ? std::min(samples - n_train, samples / 8) : samples / 8;
    if (n_train < 0) n_train = samples - n_val;
    require(n_train >= 1 && n_val >= 0 && n_train + n_val <= samples, "fit('", path, "'): the file holds ", samples,
            " samples; n_train = ", n_train, " and n_val = ", n_val, " do not fit (n_train >= 1, n_train + n_val <= ",
            samples, ")");
    r.n_train = n_train;  // the split, as the stored configuration records it
    r.n_val = std::max(1L, n_val);
    r.n_test = std::max(1L, samples - n_train - n_val);
    tr = training::read_heat_pairs(r, 0, n_train, topt.unroll);  // trajectories of unroll horizons
    if (n_val > 0) va = training::read_heat_pairs(r, n_train, n_val, topt.unroll);
  }
  FitRun run;
  run.callback = &callback;
  training::FitResult res;
  {
    py::gil_scoped_release release;
    training::HeatDataOptions stored = r;  // the stored configuration names the file by its absolute path
    stored.file = std::filesystem::absolute(path).string();
    res = m.fit(tr, va, topt, run.hooks(), restore_best, &stored);
  }
  py::dict h = run.history(res, m);
  h["n_train"] = n_train;
  h["n_val"] = n_val;
  h["samples"] = r.info ? r.info->samples : 0;
  return h;
}

Array<double> predict(PyModel& pm, const Array<double>& inputs, const py::object& extra, const Array<double>& coords,
                      const py::object& tau, long batch) {
  HeatModel& m = *pm.m;
  const long C = long(m.channel_names().size());
  const HeldArray e(C > 0 ? extra : py::none()), ta(tau);
  auto lock = lock_model(pm);
  const entry::PredictArgs a = entry::predict_args(m, host_array(inputs), e.host, host_array(coords), ta.host, batch);
  Array<double> out(std::vector<long>{a.samples, a.points});
  {
    py::gil_scoped_release release;
    const View2<double> pred = m.predict(a.inputs, a.extra, a.coords, a.tau, batch);
    Kokkos::deep_copy(HostView2<double>(out.mutable_data(), a.samples, a.points), pred);
  }
  return out;
}

py::dict grid_dict(const HeatModel& m) {
  const auto& g = m.grid();
  py::dict d;
  d["dim"] = g.dim;
  d["bc"] = std::string(enum_name(g.bc));
  d["box"] = g.box;
  d["nx"] = g.nx;
  d["ny"] = g.ny;
  d["nz"] = g.nz;
  if (!g.coords.empty()) {
    Array<double> c(std::vector<long>{g.nx * g.ny * g.nz, long(g.dim)});
    std::copy(g.coords.begin(), g.coords.end(), c.mutable_data());
    d["coords"] = c;
  } else {
    d["coords"] = py::none();
  }
  return d;
}

void bind_surrogate(py::module_& m) {
  auto s = m.def_submodule("surrogate", "the heat surrogate as an object (use attnphys.operator)");
  s.def("model_defaults", [] { return to_dict(training::SurrogateOptions{}); },
        "SurrogateOptions defaults, by option key (model.<key>)");
  s.def("train_defaults", &train_defaults, "TrainOptions defaults");
  py::class_<PyModel>(s, "Model")
      .def(py::init([](const py::dict& options, int dim, const std::vector<double>& box, const std::string& bc,
                       const std::vector<std::string>& channels, long seed) {
             auto p = std::make_unique<PyModel>();
             auto lock = lock_model(*p);
             p->m = std::make_unique<HeatModel>(surrogate_options(options), dim, box, heat::parse_bc_type(bc),
                                                channels, seed);
             return p;
           }),
           py::arg("options"), py::arg("dim"), py::arg("box"), py::arg("bc"), py::arg("channels"), py::arg("seed"))
      .def_static(
          "load",
          [](const std::string& path, const std::vector<std::string>& overrides) {
            auto p = std::make_unique<PyModel>();
            auto lock = lock_model(*p);
            {
              py::gil_scoped_release release;
              p->m = HeatModel::load(path, overrides);
            }
            return p;
          },
          py::arg("path"), py::arg("overrides") = std::vector<std::string>{})
      .def(
          "save",
          [](PyModel& p, const std::string& path) {
            auto lock = lock_model(p);
            py::gil_scoped_release release;
            p.m->save(path);
          },
          py::arg("path"))
      .def("fit", &fit_arrays, py::arg("train"), py::arg("val"), py::arg("options"), py::arg("callback"),
           py::arg("restore_best"))
      .def("fit_file", &fit_file, py::arg("path"), py::arg("field"), py::arg("channels"), py::arg("n_train"),
           py::arg("n_val"), py::arg("horizons"), py::arg("file_stride"), py::arg("options"), py::arg("callback"),
           py::arg("restore_best"))
      .def("predict", &predict, py::arg("inputs"), py::arg("channels"), py::arg("coords"), py::arg("tau"),
           py::arg("batch"))
      .def_property_readonly("n_parameters", [](const PyModel& p) { return p.m->n_parameters(); })
      .def_property_readonly("options", [](const PyModel& p) { return to_dict(p.m->options()); })
      .def_property_readonly("channels", [](const PyModel& p) { return p.m->channel_names(); })
      .def_property_readonly("trained", [](const PyModel& p) { return p.m->trained(); })
      .def_property_readonly("grid", [](const PyModel& p) { return grid_dict(*p.m); })
      .def_property_readonly("config", [](const PyModel& p) { return p.m->config(); })
      .def_property_readonly("normalisation", [](const PyModel& p) {
        const auto& n = p.m->normalisation();
        py::dict d;
        d["mean"] = n.mean;
        d["std"] = n.std;
        d["channel_mean"] = n.channel_mean;
        d["channel_std"] = n.channel_std;
        return d;
      })
      .def_property_readonly("steps_trained", [](const PyModel& p) { return p.m->state().step; })
      .def("parameters", [](PyModel& p) {
        auto lock = lock_model(p);
        const auto v = p.m->parameters().get_host(Slot::Params);
        Array<float> a(std::vector<long>{long(v.size())});
        std::copy(v.begin(), v.end(), a.mutable_data());
        return a;
      }, "a copy of the flat float32 parameter vector");
}

}  // namespace

static BindRegistrar registrar("surrogate", bind_surrogate);

}  // namespace attnphys::python
