#pragma once
// attnphys::Error: the one exception type of the library. Messages say what was wrong and what to do about it.
#include <sstream>
#include <stdexcept>
#include <string>

namespace attnphys {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// Builds a message from streamable pieces: throw Error(msg("n = ", n, " must be positive")).
template <class... Args>
std::string msg(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(msg(args...));
}

template <class... Args>
void require(bool condition, const Args&... args) {
  if (!condition) fail(args...);
}

}  // namespace attnphys
