#pragma once
// A small JSON writer for the one-line summaries every `--json` command prints. Keys keep insertion order.
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnphys {

class Json {
 public:
  Json() : kind_(Kind::Null) {}
  Json(std::nullptr_t) : kind_(Kind::Null) {}
  Json(bool b) : kind_(Kind::Bool), b_(b) {}
  Json(int v) : kind_(Kind::Int), i_(v) {}
  Json(long v) : kind_(Kind::Int), i_(v) {}
  Json(long long v) : kind_(Kind::Int), i_(v) {}
  Json(unsigned v) : kind_(Kind::Int), i_(static_cast<long long>(v)) {}
  Json(unsigned long v) : kind_(Kind::Int), i_(static_cast<long long>(v)) {}
  Json(unsigned long long v) : kind_(Kind::Int), i_(static_cast<long long>(v)) {}
  Json(double v) : kind_(Kind::Number), d_(v) {}
  Json(float v) : kind_(Kind::Number), d_(v) {}
  Json(const char* s) : kind_(Kind::String), s_(s) {}
  Json(std::string s) : kind_(Kind::String), s_(std::move(s)) {}
  template <class T>
  Json(const std::vector<T>& v) : kind_(Kind::Array) {
    for (const auto& x : v) arr_.emplace_back(x);
  }

  static Json object() {
    Json j;
    j.kind_ = Kind::Object;
    return j;
  }
  static Json array() {
    Json j;
    j.kind_ = Kind::Array;
    return j;
  }

  // Sets (or replaces) a key of an object.
  Json& set(const std::string& key, Json value);
  Json& push_back(Json value);
  std::string dump() const;

 private:
  enum class Kind { Null, Bool, Int, Number, String, Array, Object };
  Kind kind_;
  bool b_ = false;
  long long i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Json> arr_;
  std::vector<std::pair<std::string, Json>> obj_;
  void dump_to(std::string& out) const;
};

std::string json_escape(const std::string& s);

}  // namespace attnphys
