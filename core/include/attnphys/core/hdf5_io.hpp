#pragma once
// HDF5 files written safely and read defensively.
//
// A Writer writes into "<path>.tmp-<pid>" and commit() renames it into place, so a crash, an exception or a kill
// never leaves a half-written file under the final name (and never destroys the previous one). Every attnphys file
// carries root attributes: attnphys_kind ("checkpoint", "dataset", ...), attnphys_format_version,
// attnphys_version, git_revision, and optionally config (the TOML that produced it). A Reader checks them: a
// truncated, foreign or too-new file is refused with a message that says which.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnphys/core/params.hpp"
#include "attnphys/core/views.hpp"

namespace attnphys::h5 {

using Shape = std::vector<std::uint64_t>;

enum class DType { F32, F64, I32, I64, U8 };
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::F32; }
template <>
constexpr DType dtype_of<double>() { return DType::F64; }
template <>
constexpr DType dtype_of<std::int32_t>() { return DType::I32; }
template <>
constexpr DType dtype_of<std::int64_t>() { return DType::I64; }
template <>
constexpr DType dtype_of<std::uint8_t>() { return DType::U8; }

class Writer {
 public:
  Writer(const std::string& path, const std::string& kind, int format_version);
  ~Writer();  // without commit(): the temporary file is removed, the final path untouched
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

  // Attributes on the root ("/") or on an existing group or dataset.
  void set_attr(const std::string& object, const std::string& name, const std::string& value);
  void set_attr(const std::string& object, const std::string& name, double value);
  void set_attr(const std::string& object, const std::string& name, long value);
  void set_attr(const std::string& object, const std::string& name, const std::vector<double>& value);

  // A whole dataset at once (row-major data; intermediate groups are created).
  template <class T>
  void write(const std::string& name, const T* data, const Shape& shape) {
    write_raw(name, dtype_of<T>(), data, shape);
  }
  template <class T>
  void write(const std::string& name, const std::vector<T>& data) {
    write_raw(name, dtype_of<T>(), data.data(), Shape{data.size()});  // Shape{}: nvcc drops a bare {} here
  }
  // A chunked dataset filled in slabs along its first dimension (streaming larger-than-memory data).
  template <class T>
  void create(const std::string& name, const Shape& shape, const Shape& chunk) {
    create_raw(name, dtype_of<T>(), shape, chunk);
  }
  template <class T>
  void write_rows(const std::string& name, std::uint64_t first_row, std::uint64_t rows, const T* data) {
    write_rows_raw(name, dtype_of<T>(), first_row, rows, data);
  }

  void commit();  // flush, close, rename into place

 private:
  std::string path_, tmp_;
  long long file_ = -1;
  bool committed_ = false;
  void write_raw(const std::string& name, DType t, const void* data, const Shape& shape);
  void create_raw(const std::string& name, DType t, const Shape& shape, const Shape& chunk);
  void write_rows_raw(const std::string& name, DType t, std::uint64_t first, std::uint64_t rows, const void* data);
};

// Tag for opening an HDF5 file that attnphys may not have written (a PDEBench file, one made with h5py).
struct AnyFile {};

class Reader {
 public:
  // expected_kind empty: any attnphys file. Files newer than max_version are refused.
  Reader(const std::string& path, const std::string& expected_kind, int max_version);
  // Any HDF5 file: a missing, empty, truncated, corrupted or non-HDF5 file is still refused, but the attnphys
  // attributes are not required. When they are there, check them with require_kind() before trusting the file.
  Reader(const std::string& path, AnyFile);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::string& path() const { return path_; }
  std::string kind() const { return attr_string("/", "attnphys_kind"); }
  long format_version() const { return attr_long("/", "attnphys_format_version"); }

  // Whether the file carries attnphys' identifying attributes (attnphys_kind, attnphys_format_version).
  bool is_attnphys() const;
  // The checks of the first constructor, for a file opened with AnyFile: an attnphys file of this kind (any kind
  // when empty) and a format version in 1..max_version, else an error that says which.
  void require_kind(const std::string& expected_kind, int max_version) const;

  bool has(const std::string& name) const;
  // Whether `name` is a dataset (not a group) of numbers (integers or floating point).
  bool is_numeric_dataset(const std::string& name) const;
  // The paths of every dataset in the file, without the leading '/', sorted ("data", "grid/x", ...).
  std::vector<std::string> datasets() const;
  Shape shape(const std::string& name) const;
  template <class T>
  std::vector<T> read(const std::string& name, Shape* shape_out = nullptr) const {
    Shape s = shape(name);
    std::uint64_t n = 1;
    for (auto e : s) n *= e;
    std::vector<T> out(n);
    read_raw(name, dtype_of<T>(), out.data());
    if (shape_out) *shape_out = s;
    return out;
  }
  template <class T>
  void read_rows(const std::string& name, std::uint64_t first_row, std::uint64_t rows, T* out) const {
    read_rows_raw(name, dtype_of<T>(), first_row, rows, out);
  }

  bool has_attr(const std::string& object, const std::string& name) const;
  std::string attr_string(const std::string& object, const std::string& name) const;
  double attr_double(const std::string& object, const std::string& name) const;
  long attr_long(const std::string& object, const std::string& name) const;
  std::vector<double> attr_doubles(const std::string& object, const std::string& name) const;

 private:
  std::string path_;
  long long file_ = -1;
  void open(const std::string& path);
  void read_raw(const std::string& name, DType t, void* out) const;
  void read_rows_raw(const std::string& name, DType t, std::uint64_t first, std::uint64_t rows, void* out) const;
};

// Row-major copies for views of rank 1..4 in host memory (any layout).
template <class H, class T>
void copy_to_row_major(const H& h, T* out) {
  std::size_t k = 0;
  if constexpr (H::rank == 1) {
    for (std::size_t i = 0; i < h.extent(0); ++i) out[k++] = h(i);
  } else if constexpr (H::rank == 2) {
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j) out[k++] = h(i, j);
  } else if constexpr (H::rank == 3) {
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j)
        for (std::size_t l = 0; l < h.extent(2); ++l) out[k++] = h(i, j, l);
  } else {
    static_assert(H::rank == 4, "views of rank 1 to 4");
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j)
        for (std::size_t l = 0; l < h.extent(2); ++l)
          for (std::size_t m = 0; m < h.extent(3); ++m) out[k++] = h(i, j, l, m);
  }
}
template <class T, class H>
void copy_from_row_major(const T* in, const H& h) {
  std::size_t k = 0;
  if constexpr (H::rank == 1) {
    for (std::size_t i = 0; i < h.extent(0); ++i) h(i) = in[k++];
  } else if constexpr (H::rank == 2) {
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j) h(i, j) = in[k++];
  } else if constexpr (H::rank == 3) {
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j)
        for (std::size_t l = 0; l < h.extent(2); ++l) h(i, j, l) = in[k++];
  } else {
    static_assert(H::rank == 4, "views of rank 1 to 4");
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j)
        for (std::size_t l = 0; l < h.extent(2); ++l)
          for (std::size_t m = 0; m < h.extent(3); ++m) h(i, j, l, m) = in[k++];
  }
}

// Views: copied through host memory; the shape in the file must equal the view's extents.
template <class V>
void write_view(Writer& w, const std::string& name, const V& v) {
  using T = typename V::non_const_value_type;
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  // Stage through a contiguous row-major buffer whatever the view's layout.
  Shape shape;
  for (unsigned r = 0; r < V::rank; ++r) shape.push_back(v.extent(r));
  std::vector<T> buf(h.size());
  copy_to_row_major(h, buf.data());
  w.write<T>(name, buf.data(), shape);
}

template <class V>
void read_view(const Reader& r, const std::string& name, const V& v) {
  using T = typename V::non_const_value_type;
  Shape s;
  std::vector<T> buf = r.read<T>(name, &s);
  std::string want, got;
  bool same = s.size() == V::rank;
  for (unsigned i = 0; i < V::rank; ++i) {
    want += (i ? "x" : "") + std::to_string(v.extent(i));
    if (same && s[i] != v.extent(i)) same = false;
  }
  for (std::size_t i = 0; i < s.size(); ++i) got += (i ? "x" : "") + std::to_string(s[i]);
  require(same, "dataset '", name, "' in ", r.path(), " has shape ", got, ", expected ", want);
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  copy_from_row_major(buf.data(), h);
  Kokkos::deep_copy(v, h);
}

// Parameter buffers: the parameters (and, with optimizer_state, the moments) of each block, plus the block table,
// under a group. Reading checks that names and shapes match the model.
template <class T>
void write_parameters(Writer& w, const std::string& group, const ParameterBuffer<T>& p, bool optimizer_state);
template <class T>
void read_parameters(const Reader& r, const std::string& group, ParameterBuffer<T>& p, bool optimizer_state);

}  // namespace attnphys::h5
