#pragma once
// Typed configuration.
//
// Each options struct (OptimizerOptions, HeatSolverOptions, ...) declares its fields into an OptionSet under a
// section name. The set then takes values from TOML files and `--set section.key=value` overrides: unknown keys are
// refused with the nearest valid key suggested, values of the wrong type or outside their range are refused with
// the allowed range, and the final values can be written back as TOML (stored in checkpoints) or JSON.
#include <functional>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/core/json.hpp"

namespace attnphys {

struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;  // lo itself excluded
  bool hi_open = false;
  static Range positive() { return {0.0, std::numeric_limits<double>::infinity(), true, false}; }
  static Range non_negative() { return {0.0, std::numeric_limits<double>::infinity(), false, false}; }
  static Range closed(double lo, double hi) { return {lo, hi, false, false}; }
  static Range at_least(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, false}; }
  bool contains(double x) const;
  std::string describe() const;
};

class OptionSet {
 public:
  void add(const std::string& key, double* target, const std::string& help, Range range = {});
  void add(const std::string& key, long* target, const std::string& help, Range range = {});
  void add(const std::string& key, int* target, const std::string& help, Range range = {});
  void add(const std::string& key, bool* target, const std::string& help);
  void add(const std::string& key, std::string* target, const std::string& help,
           std::vector<std::string> choices = {});
  void add(const std::string& key, std::vector<double>* target, const std::string& help, Range range = {});
  // A list of strings: a TOML array of strings, or one string for a list of one (--set data.channels=kappa).
  void add(const std::string& key, std::vector<std::string>* target, const std::string& help);

  // Reads a TOML file; every key in it must be declared.
  void load_file(const std::string& path);
  void load_string(const std::string& toml_text, const std::string& source = "<string>");
  // Applies one override "section.key=value"; the value is read as TOML (so 1e-3, true, [1, 2] work) and otherwise
  // taken as a bare string (--set model.kind=dense).
  void set(const std::string& assignment);
  void set_all(const std::vector<std::string>& assignments) {
    for (const auto& a : assignments) set(a);
  }

  bool has(const std::string& key) const;
  // Whether a config file or an override gave this key a value (defaults that depend on other options use it).
  bool was_set(const std::string& key) const;
  std::vector<std::string> keys() const;
  std::string to_toml() const;
  Json to_json() const;
  std::string help() const;
  // The declared key closest to `key` (edit distance), or "" when nothing is close.
  std::string nearest(const std::string& key) const;

 private:
  enum class Type { Double, Long, Int, Bool, String, DoubleList, StringList };
  struct Entry {
    std::string key;
    Type type;
    void* target;
    std::string help;
    Range range;
    std::vector<std::string> choices;
    bool set = false;
  };
  std::vector<Entry> entries_;
  Entry& find(const std::string& key, const std::string& source);
  void add_entry(Entry e);
  friend struct OptionSetAccess;
};

// Edit distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace attnphys
