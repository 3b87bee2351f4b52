// attnphys train heat / attnphys eval heat: the heat-equation surrogate (the README's main job).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "attnphys/solvers/training/heat_training.hpp"
#include "cli_common.hpp"

namespace attnphys::cli {

namespace {
void print_result(const training::HeatRunResult& r, bool json) {
  if (!Comm::world().is_root()) return;
  std::cout << r.table();
  if (json) emit_json(r.to_json());
}
}  // namespace

void register_train(CLI::App& app) {
  auto* train = app.add_subcommand("train", "train a learned operator");
  train->require_subcommand(1);
  auto* heat = train->add_subcommand(
      "heat", "train the attention surrogate of the heat equation on data from the ADI solver, then evaluate it (defaults: "
      "the main job, configs/heat2d.toml: a log-normal kappa family on a periodic 32x32 grid, the kappa-conditioned "
      "attention operator; configs/heat2d_constant.toml: the constant-kappa problem)");
  auto flags = std::make_shared<CommonFlags>();
  flags->add_to(heat);
  auto print_config = std::make_shared<bool>(false);
  heat->add_flag("--print-config", *print_config,
                 "print the configuration that the file and --set resolve to (TOML) and exit");
  heat->callback([flags, print_config]() {
    training::HeatRunConfig cfg = training::HeatRunConfig::main_job();  // then the file, then --set
    OptionSet set;
    cfg.declare(set);
    flags->apply(set);
    cfg.apply_schedule_defaults(set);
    if (*print_config) {
      if (Comm::world().is_root()) std::cout << set.to_toml();
      return;
    }
    print_result(training::run_heat(cfg, set.to_toml()), flags->json);
  });

  auto* ev = app.add_subcommand("eval", "evaluate a trained operator");
  ev->require_subcommand(1);
  auto* evheat = ev->add_subcommand("heat", "evaluate a heat-surrogate checkpoint (test metrics, rollout, transfer, "
                                            "speed against ADI, attention map)");
  auto ckpt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto eflags = std::make_shared<CommonFlags>();
  evheat->add_option("--checkpoint", *ckpt, "checkpoint.h5 written by attnphys train heat")->required();
  evheat->add_option("--out", *out, "directory for eval.h5 and summary.json (default: the checkpoint's)");
  eflags->add_to(evheat);
  evheat->callback([ckpt, out, eflags]() {
    require(eflags->config.empty(), "eval heat uses the configuration stored in the checkpoint; change evaluation ",
            "settings with --set eval.KEY=VALUE");
    std::string dir = out->empty() ? std::filesystem::path(*ckpt).parent_path().string() : *out;
    if (dir.empty()) dir = ".";
    print_result(training::evaluate_heat_checkpoint(*ckpt, eflags->sets, dir), eflags->json);
  });
}

static Registrar registrar("train", register_train);

}  // namespace attnphys::cli
