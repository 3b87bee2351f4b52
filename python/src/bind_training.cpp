// attnphys.training: the heat-surrogate training and evaluation, the same code path as `attnphys train heat`.
#include "attnphys/solvers/training/heat_training.hpp"
#include "bindings.hpp"

#include <algorithm>

namespace attnphys::python {

namespace {

py::dict to_dict(const training::HeatRunResult& r) {
  // The JSON summary is the contract shared with the CLI; parse it into a dict.
  return py::module_::import("json").attr("loads")(r.to_json().dump());
}

training::HeatRunConfig configure(const std::string& config, const std::vector<std::string>& overrides,
                                  std::string* toml) {
  training::HeatRunConfig cfg = training::HeatRunConfig::main_job();  // then the file, then the overrides
  OptionSet set;
  cfg.declare(set);
  if (!config.empty()) set.load_file(config);
  set.set_all(overrides);
  cfg.apply_schedule_defaults(set);
  *toml = set.to_toml();
  return cfg;
}

void bind_training(py::module_& m) {
  auto t = m.def_submodule("training", "heat-surrogate training and evaluation");
  t.def(
      "train_heat",
      [](const std::string& config, const std::vector<std::string>& overrides) {
        std::string toml;
        auto cfg = configure(config, overrides, &toml);
        training::HeatRunResult r;
        {
          py::gil_scoped_release release;
          r = training::run_heat(cfg, toml);
        }
        return to_dict(r);
      },
      py::arg("config") = "", py::arg("overrides") = std::vector<std::string>{},
      "Train and evaluate the heat surrogate. config: a TOML file (empty: defaults = configs/heat2d.toml); "
      "overrides: ['section.key=value', ...]. Returns the summary dict (the JSON `attnphys train heat --json` "
      "prints).");
  t.def(
      "evaluate_heat",
      [](const std::string& checkpoint, const std::vector<std::string>& overrides, const std::string& out_dir) {
        training::HeatRunResult r;
        {
          py::gil_scoped_release release;
          r = training::evaluate_heat_checkpoint(checkpoint, overrides, out_dir);
        }
        return to_dict(r);
      },
      py::arg("checkpoint"), py::arg("overrides") = std::vector<std::string>{}, py::arg("out_dir") = ".");
  t.def("default_config", []() {
    training::HeatRunConfig cfg = training::HeatRunConfig::main_job();
    OptionSet set;
    cfg.declare(set);
    cfg.train.schedule.total_steps = cfg.train.steps;
    return set.to_toml();
  }, "the default configuration as TOML");
}

}  // namespace

static BindRegistrar registrar("training", bind_training);

}  // namespace attnphys::python
