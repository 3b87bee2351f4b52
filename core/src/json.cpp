#include "attnphys/core/json.hpp"

#include <cstdio>

#include "attnphys/core/error.hpp"

namespace attnphys {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

Json& Json::set(const std::string& key, Json value) {
  require(kind_ == Kind::Object, "Json::set called on a value that is not an object");
  for (auto& kv : obj_)
    if (kv.first == key) {
      kv.second = std::move(value);
      return *this;
    }
  obj_.emplace_back(key, std::move(value));
  return *this;
}

Json& Json::push_back(Json value) {
  require(kind_ == Kind::Array, "Json::push_back called on a value that is not an array");
  arr_.push_back(std::move(value));
  return *this;
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

void Json::dump_to(std::string& out) const {
  switch (kind_) {
    case Kind::Null: out += "null"; break;
    case Kind::Bool: out += b_ ? "true" : "false"; break;
    case Kind::Int: out += std::to_string(i_); break;
    case Kind::Number: {
      if (!std::isfinite(d_)) {  // JSON has no NaN/Inf; null is what json.loads accepts
        out += "null";
        break;
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", d_);
      out += buf;
      break;
    }
    case Kind::String: out += '"' + json_escape(s_) + '"'; break;
    case Kind::Array: {
      out += '[';
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i) out += ", ";
        arr_[i].dump_to(out);
      }
      out += ']';
      break;
    }
    case Kind::Object: {
      out += '{';
      for (size_t i = 0; i < obj_.size(); ++i) {
        if (i) out += ", ";
        out += '"' + json_escape(obj_[i].first) + "\": ";
        obj_[i].second.dump_to(out);
      }
      out += '}';
      break;
    }
  }
}

}  // namespace attnphys
