#include "attnphys/core/options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "attnphys/core/error.hpp"

namespace attnphys {

bool Range::contains(double x) const {
  if (std::isnan(x)) return false;
  if (lo_open ? !(x > lo) : !(x >= lo)) return false;
  if (hi_open ? !(x < hi) : !(x <= hi)) return false;
  return true;
}

std::string Range::describe() const {
  std::ostringstream os;
  os << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
  return os.str();
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

void OptionSet::add_entry(Entry e) {
  require(!has(e.key), "option '", e.key, "' declared twice");
  require(e.key.find('.') != std::string::npos, "option '", e.key, "' must be 'section.key'");
  entries_.push_back(std::move(e));
}

void OptionSet::add(const std::string& k, double* t, const std::string& h, Range r) {
  add_entry({k, Type::Double, t, h, r, {}});
}
void OptionSet::add(const std::string& k, long* t, const std::string& h, Range r) {
  add_entry({k, Type::Long, t, h, r, {}});
}
void OptionSet::add(const std::string& k, int* t, const std::string& h, Range r) {
  add_entry({k, Type::Int, t, h, r, {}});
}
void OptionSet::add(const std::string& k, bool* t, const std::string& h) { add_entry({k, Type::Bool, t, h, {}, {}}); }
void OptionSet::add(const std::string& k, std::string* t, const std::string& h, std::vector<std::string> c) {
  add_entry({k, Type::String, t, h, {}, std::move(c)});
}
void OptionSet::add(const std::string& k, std::vector<double>* t, const std::string& h, Range r) {
  add_entry({k, Type::DoubleList, t, h, r, {}});
}
void OptionSet::add(const std::string& k, std::vector<std::string>* t, const std::string& h) {
  add_entry({k, Type::StringList, t, h, {}, {}});
}

void OptionSet::add_enum(const std::string& k, const std::string& h, std::vector<std::string> names,
                         std::function<void(std::size_t)> set_index, std::function<std::size_t()> get_index) {
  require(!names.empty(), "option '", k, "' has no choices");
  Entry e{k, Type::Enum, nullptr, h, {}, std::move(names)};
  e.set_index = std::move(set_index);
  e.get_index = std::move(get_index);
  add_entry(std::move(e));
}

bool OptionSet::has(const std::string& key) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
}

bool OptionSet::was_set(const std::string& key) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key && e.set; });
}

OptionInfo OptionSet::info(const std::string& key) const {
  const Entry& e = const_cast<OptionSet*>(this)->find(key, "info");
  static const char* names[] = {"number", "integer", "integer", "bool", "string", "numbers", "strings", "choice"};
  return {e.key, e.help, names[static_cast<int>(e.type)], e.choices, e.range};
}

std::vector<std::string> OptionSet::keys() const {
  std::vector<std::string> k;
  for (const auto& e : entries_) k.push_back(e.key);
  return k;
}

std::string OptionSet::nearest(const std::string& key) const {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& e : entries_) {
    std::size_t d = edit_distance(key, e.key);
    // A key whose last part matches exactly is a strong hint even when the section differs.
    const auto leaf = [](const std::string& s) { return s.substr(s.rfind('.') + 1); };
    if (leaf(key) == leaf(e.key)) d = std::min<std::size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = e.key;
    }
  }
  return best;
}

OptionSet::Entry& OptionSet::find(const std::string& key, const std::string& source) {
  for (auto& e : entries_)
    if (e.key == key) return e;
  std::string hint = nearest(key);
  std::string valid;
  for (const auto& e : entries_) valid += (valid.empty() ? "" : ", ") + e.key;
  if (entries_.empty()) fail("unknown option '", key, "' (from ", source, "): this command takes no options");
  fail("unknown option '", key, "' (from ", source, ")", hint.empty() ? "" : "; did you mean '" + hint + "'?",
       " Valid options: ", valid);
}

namespace {

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string \"" + std::string(*n.as_string()) + "\"";
    case toml::node_type::integer: return "integer " + std::to_string(n.as_integer()->get());
    case toml::node_type::floating_point: return "number";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "value";
  }
}

bool as_number(const toml::node& n, double& out) {
  if (auto v = n.as_floating_point()) {
    out = v->get();
    return true;
  }
  if (auto v = n.as_integer()) {
    out = static_cast<double>(v->get());
    return true;
  }
  return false;
}

}  // namespace

struct OptionSetAccess {
  static void assign(OptionSet::Entry& e, const toml::node& n, const std::string& source) {
    using Type = OptionSet::Type;
    const std::string where = "option '" + e.key + "' (from " + source + ")";
    e.set = true;
    auto check_range = [&](double x) {
      require(e.range.contains(x), where, " = ", x, " is out of range; allowed: ", e.range.describe());
    };
    switch (e.type) {
      case Type::Double: {
        double x;
        require(as_number(n, x), where, " expects a number, got ", type_name(n));
        check_range(x);
        *static_cast<double*>(e.target) = x;
        break;
      }
      case Type::Long:
      case Type::Int: {
        auto v = n.as_integer();
        double xd;
        if (!v && as_number(n, xd) && std::floor(xd) == xd && std::abs(xd) < 9e15) {
          // 1e3 written for 1000 is fine
        } else {
          require(v != nullptr, where, " expects an integer, got ", type_name(n));
          xd = static_cast<double>(v->get());
        }
        check_range(xd);
        if (e.type == Type::Long)
          *static_cast<long*>(e.target) = static_cast<long>(xd);
        else {
          require(std::abs(xd) < 2147483647.0, where, " = ", xd, " does not fit an int");
          *static_cast<int*>(e.target) = static_cast<int>(xd);
        }
        break;
      }
      case Type::Bool: {
        auto v = n.as_boolean();
        require(v != nullptr, where, " expects true or false, got ", type_name(n));
        *static_cast<bool*>(e.target) = v->get();
        break;
      }
      case Type::String:
      case Type::Enum: {
        auto v = n.as_string();
        require(v != nullptr, where, " expects a string, got ", type_name(n));
        std::string s(v->get());
        const auto it = std::find(e.choices.begin(), e.choices.end(), s);
        if (!e.choices.empty() && it == e.choices.end()) {
          std::string c;
          for (const auto& x : e.choices) c += (c.empty() ? "" : ", ") + x;
          std::string best;
          std::size_t bd = std::string::npos;
          for (const auto& x : e.choices)
            if (edit_distance(s, x) < bd) bd = edit_distance(s, x), best = x;
          fail(where, " = '", s, "' is not one of: ", c, (bd <= 3 ? "; did you mean '" + best + "'?" : ""));
        }
        if (e.type == Type::Enum)
          e.set_index(static_cast<std::size_t>(it - e.choices.begin()));
        else
          *static_cast<std::string*>(e.target) = s;
        break;
      }
      case Type::DoubleList: {
        auto arr = n.as_array();
        std::vector<double> out;
        if (arr) {
          for (const auto& el : *arr) {
            double x;
            require(as_number(el, x), where, " expects a list of numbers, found ", type_name(el));
            check_range(x);
            out.push_back(x);
          }
        } else {
          double x;
          require(as_number(n, x), where, " expects a list of numbers such as [0.1, 0.5], got ", type_name(n));
          check_range(x);
          out.push_back(x);
        }
        *static_cast<std::vector<double>*>(e.target) = out;
        break;
      }
      case Type::StringList: {
        std::vector<std::string> out;
        if (auto arr = n.as_array()) {
          for (const auto& el : *arr) {
            auto v = el.as_string();
            require(v != nullptr, where, " expects a list of strings such as [\"a\", \"b\"], found ", type_name(el));
            out.emplace_back(v->get());
          }
        } else {
          auto v = n.as_string();
          require(v != nullptr, where, " expects a list of strings such as [\"a\", \"b\"], got ", type_name(n));
          out.emplace_back(v->get());
        }
        *static_cast<std::vector<std::string>*>(e.target) = out;
        break;
      }
    }
  }

  static void walk(OptionSet& set, const toml::table& t, const std::string& prefix, const std::string& source) {
    for (const auto& [k, node] : t) {
      const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (auto sub = node.as_table()) {
        walk(set, *sub, key, source);
      } else {
        auto& e = set.find(key, source);
        assign(e, node, source);
      }
    }
  }
};

void OptionSet::load_string(const std::string& text, const std::string& source) {
  toml::table t;
  try {
    t = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    const auto& b = err.source().begin;
    fail("cannot parse ", source, " as TOML at line ", b.line, ", column ", b.column, ": ", err.description());
  }
  OptionSetAccess::walk(*this, t, "", source);
}

void OptionSet::load_file(const std::string& path) {
  std::ifstream in(path);
  require(in.good(), "cannot open config file '", path, "': check the path (relative paths are from the working ",
          "directory)");
  std::stringstream ss;
  ss << in.rdbuf();
  load_string(ss.str(), path);
}

namespace {
// The position of the first byte that does not start or continue a well-formed UTF-8 sequence (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or npos. TOML documents are UTF-8: a --set value that is
// not would be stored in checkpoints as a configuration that no longer parses.
std::size_t invalid_utf8(const std::string& s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = b[i];
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (i + len > n) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned d = b[i + k];
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return i;
    }
    i += len;
  }
  return std::string::npos;
}

// A TOML basic string: JSON's escapes, plus DEL, which TOML (unlike JSON) does not allow unescaped.
std::string toml_quote(const std::string& s) {
  std::string e = json_escape(s), out = "\"";
  for (char c : e) out += c == '\x7f' ? std::string("\\u007f") : std::string(1, c);
  return out + '"';
}
}  // namespace

void OptionSet::set(const std::string& assignment) {
  const std::size_t bad = invalid_utf8(assignment);
  if (bad != std::string::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(assignment[bad]));
    fail("--set '", assignment.substr(0, std::min<std::size_t>(bad, 60)), "...': byte ", byte, " at position ", bad,
         " is not UTF-8; configurations (and the copies stored in checkpoints) are UTF-8 text");
  }
  const auto eq = assignment.find('=');
  require(eq != std::string::npos && eq > 0, "--set expects section.key=value, got '", assignment, "'");
  std::string key = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  while (!key.empty() && key.back() == ' ') key.pop_back();
  auto& e = find(key, "--set");
  toml::table t;
  bool parsed = false;
  try {
    t = toml::parse("v = " + value);
    parsed = true;
  } catch (const toml::parse_error&) {
  }
  if (parsed && t.get("v")) {
    const toml::node& n = *t.get("v");
    if ((e.type == Type::String || e.type == Type::Enum) && !n.is_string()) {
      // Allow bare words and numbers for string options: --set model.kind=dense
      toml::value<std::string> s(value);
      OptionSetAccess::assign(e, s, "--set");
    } else {
      OptionSetAccess::assign(e, n, "--set");
    }
  } else {
    toml::value<std::string> s(value);
    OptionSetAccess::assign(e, s, "--set");
  }
}

void OptionSet::set_text(const std::string& key, const std::string& text, const std::string& source) {
  const std::size_t bad = invalid_utf8(text);
  require(bad == std::string::npos, source, " '", text.substr(0, std::min<std::size_t>(bad, 60)), "...': byte ",
          bad, " is not UTF-8; configurations (and the copies stored in checkpoints) are UTF-8 text");
  auto& e = find(key, source);
  if (e.type == Type::String || e.type == Type::Enum || e.type == Type::StringList) {
    OptionSetAccess::assign(e, toml::value<std::string>(text), source);
    return;
  }
  toml::table t;
  try {
    t = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
  }
  if (const toml::node* n = t.get("v"))
    OptionSetAccess::assign(e, *n, source);
  else
    OptionSetAccess::assign(e, toml::value<std::string>(text), source);  // reports the type it expected
}

namespace {
std::string format_double(double x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  std::string s = os.str();
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a TOML float
  return s;
}
}  // namespace

std::string OptionSet::to_toml() const {
  // Group by section (everything before the last dot) in declaration order.
  std::vector<std::string> sections;
  for (const auto& e : entries_) {
    std::string sec = e.key.substr(0, e.key.rfind('.'));
    if (std::find(sections.begin(), sections.end(), sec) == sections.end()) sections.push_back(sec);
  }
  std::ostringstream os;
  for (const auto& sec : sections) {
    os << "[" << sec << "]\n";
    for (const auto& e : entries_) {
      if (e.key.substr(0, e.key.rfind('.')) != sec) continue;
      os << e.key.substr(e.key.rfind('.') + 1) << " = ";
      switch (e.type) {
        case Type::Double: os << format_double(*static_cast<double*>(e.target)); break;
        case Type::Long: os << *static_cast<long*>(e.target); break;
        case Type::Int: os << *static_cast<int*>(e.target); break;
        case Type::Bool: os << (*static_cast<bool*>(e.target) ? "true" : "false"); break;
        case Type::String: os << toml_quote(*static_cast<std::string*>(e.target)); break;
        case Type::Enum: os << toml_quote(e.choices.at(e.get_index())); break;
        case Type::DoubleList: {
          os << "[";
          const auto& v = *static_cast<std::vector<double>*>(e.target);
          for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << format_double(v[i]);
          os << "]";
          break;
        }
        case Type::StringList: {
          os << "[";
          const auto& v = *static_cast<std::vector<std::string>*>(e.target);
          for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << toml_quote(v[i]);
          os << "]";
          break;
        }
      }
      os << "\n";
    }
    os << "\n";
  }
  return os.str();
}

Json OptionSet::to_json() const {
  Json j = Json::object();
  for (const auto& e : entries_) {
    switch (e.type) {
      case Type::Double: j.set(e.key, *static_cast<double*>(e.target)); break;
      case Type::Long: j.set(e.key, *static_cast<long*>(e.target)); break;
      case Type::Int: j.set(e.key, *static_cast<int*>(e.target)); break;
      case Type::Bool: j.set(e.key, *static_cast<bool*>(e.target)); break;
      case Type::String: j.set(e.key, *static_cast<std::string*>(e.target)); break;
      case Type::Enum: j.set(e.key, e.choices.at(e.get_index())); break;
      case Type::DoubleList: j.set(e.key, *static_cast<std::vector<double>*>(e.target)); break;
      case Type::StringList: {
        Json a = Json::array();
        for (const auto& x : *static_cast<std::vector<std::string>*>(e.target)) a.push_back(x);
        j.set(e.key, a);
        break;
      }
    }
  }
  return j;
}

std::string OptionSet::help() const {
  std::ostringstream os;
  for (const auto& e : entries_) {
    os << "  " << e.key << "  " << e.help;
    if (e.type == Type::Double || e.type == Type::Long || e.type == Type::Int) {
      if (std::isfinite(e.range.lo) || std::isfinite(e.range.hi)) os << " " << e.range.describe();
    }
    if (!e.choices.empty()) {
      os << " {";
      for (std::size_t i = 0; i < e.choices.size(); ++i) os << (i ? "|" : "") << e.choices[i];
      os << "}";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace attnphys
