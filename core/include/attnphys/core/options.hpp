#pragma once
// Typed configuration.
//
// Each options struct (OptimizerOptions, HeatSolverOptions, ...) declares its fields into an OptionSet under a
// section name. The set then takes values from TOML files and `--set section.key=value` overrides: unknown keys are
// refused with the nearest valid key suggested, values of the wrong type or outside their range are refused with
// the allowed range, and the final values can be written back as TOML (stored in checkpoints) or JSON.
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "attnphys/core/error.hpp"
#include "attnphys/core/json.hpp"

namespace attnphys {

// Enumerated options. A choice is an `enum class` with its names declared once, next to the enum:
//
//   enum class SamplerMove { Auto, Local, Exchange, Exact };
//   template <> struct EnumNames<vmc::SamplerMove> {
//     static constexpr EnumName<vmc::SamplerMove> values[] = {{vmc::SamplerMove::Auto, "auto"}, ...};
//   };
//
// The config file, `--set`, the CLI flags' checks and the Python keyword arguments all read the same table:
// parse_enum<E>(text, where) turns a name into the value (the error lists the valid names), enum_name(e) gives the
// name back for JSON, TOML and messages, and OptionSet::add(key, &field, help) declares an enum field as an option
// whose values are the names. Library code stores and dispatches on the enum; no name is compared after parsing.
template <class E>
struct EnumName {
  E value;
  const char* name;
};
template <class E>
struct EnumNames;  // specialised next to each enum: static constexpr EnumName<E> values[] = {...};

template <class E, class = void>
struct has_enum_names : std::false_type {};
template <class E>
struct has_enum_names<E, std::void_t<decltype(EnumNames<E>::values)>> : std::true_type {};

// The name of `e` ("?" for a value outside the table, which an enum class only holds after a cast).
template <class E, std::enable_if_t<has_enum_names<E>::value, int> = 0>
const char* enum_name(E e) {
  for (const auto& c : EnumNames<E>::values)
    if (c.value == e) return c.name;
  return "?";
}
// All names in declaration order.
template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (const auto& c : EnumNames<E>::values) out.emplace_back(c.name);
  return out;
}
// "a, b, c" (or with another separator: "a | b | c").
template <class E>
std::string enum_list(const char* sep = ", ") {
  std::string out;
  for (const auto& c : EnumNames<E>::values) out += (out.empty() ? "" : sep) + std::string(c.name);
  return out;
}
// The value named `text`, or nullopt.
template <class E>
std::optional<E> find_enum(const std::string& text) {
  for (const auto& c : EnumNames<E>::values)
    if (text == c.name) return c.value;
  return std::nullopt;
}
// The value named `text`; `where` names the option in the error ("vmc.optimizer = 'adamw': expected one of sr,
// pxp, minsr, adam").
template <class E>
E parse_enum(const std::string& text, const std::string& where) {
  if (auto e = find_enum<E>(text)) return *e;
  fail(where, " = '", text, "': expected one of ", enum_list<E>());
}

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

// What a declaration says about one option (for generated CLI flags, Python keywords and help).
struct OptionInfo {
  std::string key, help;
  std::string type;                  // "number", "integer", "bool", "string", "choice", "numbers", "strings"
  std::vector<std::string> choices;  // the names of a choice (or of a string option that lists them)
  Range range;
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
  // An enum field (see EnumNames): written and read as one of its names.
  template <class E, std::enable_if_t<has_enum_names<E>::value, int> = 0>
  void add(const std::string& key, E* target, const std::string& help) {
    add_enum(key, help, enum_names<E>(),
             [target](std::size_t i) { *target = EnumNames<E>::values[i].value; },
             [target]() {
               std::size_t i = 0;
               for (const auto& c : EnumNames<E>::values) {
                 if (c.value == *target) return i;
                 ++i;
               }
               return std::size_t(0);
             });
  }

  // An enum field that takes only some of its values (`allowed`, in this order); the others are refused like an
  // unknown name.
  template <class E, std::enable_if_t<has_enum_names<E>::value, int> = 0>
  void add(const std::string& key, E* target, const std::string& help, std::vector<E> allowed) {
    std::vector<std::string> names;
    for (E e : allowed) names.emplace_back(enum_name(e));
    add_enum(key, help, std::move(names), [target, allowed](std::size_t i) { *target = allowed[i]; },
             [target, allowed]() {
               for (std::size_t i = 0; i < allowed.size(); ++i)
                 if (allowed[i] == *target) return i;
               return std::size_t(0);
             });
  }

  // Reads a TOML file; every key in it must be declared.
  void load_file(const std::string& path);
  void load_string(const std::string& toml_text, const std::string& source = "<string>");
  // Applies one override "section.key=value"; the value is read as TOML (so 1e-3, true, [1, 2] work) and otherwise
  // taken as a bare string (--set model.kind=dense).
  void set(const std::string& assignment);
  void set_all(const std::vector<std::string>& assignments) {
    for (const auto& a : assignments) set(a);
  }
  // Applies the text of a command-line flag to `key` (source names the flag in errors, e.g. "--n"): string and
  // choice options take the text as it is, the others read it as a TOML value; checked and marked set like --set.
  void set_text(const std::string& key, const std::string& text, const std::string& source);

  bool has(const std::string& key) const;
  // Whether a config file or an override gave this key a value (defaults that depend on other options use it).
  bool was_set(const std::string& key) const;
  std::vector<std::string> keys() const;
  OptionInfo info(const std::string& key) const;  // an unknown key fails as in set()
  std::string to_toml() const;
  Json to_json() const;
  std::string help() const;
  // The declared key closest to `key` (edit distance), or "" when nothing is close.
  std::string nearest(const std::string& key) const;

 private:
  enum class Type { Double, Long, Int, Bool, String, DoubleList, StringList, Enum };
  struct Entry {
    std::string key;
    Type type;
    void* target;
    std::string help;
    Range range;
    std::vector<std::string> choices;
    bool set = false;
    // Type::Enum: stores choice i into the field, and reads the index of the field's value.
    std::function<void(std::size_t)> set_index;
    std::function<std::size_t()> get_index;
  };
  std::vector<Entry> entries_;
  void add_enum(const std::string& key, const std::string& help, std::vector<std::string> names,
                std::function<void(std::size_t)> set_index, std::function<std::size_t()> get_index);
  Entry& find(const std::string& key, const std::string& source);
  void add_entry(Entry e);
  friend struct OptionSetAccess;
};

// Edit distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace attnphys
