#include "attnphys/core/hdf5_io.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "attnphys/core/build_info.hpp"

namespace attnphys::h5 {

namespace {

// HDF5 prints its error stack to stderr by default; we turn every failure into an attnphys::Error instead.
void silence_hdf5() {
  static bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

hid_t native(DType t) {
  switch (t) {
    case DType::F32: return H5T_NATIVE_FLOAT;
    case DType::F64: return H5T_NATIVE_DOUBLE;
    case DType::I32: return H5T_NATIVE_INT32;
    case DType::I64: return H5T_NATIVE_INT64;
    case DType::U8: return H5T_NATIVE_UINT8;
  }
  return H5T_NATIVE_DOUBLE;
}

struct Handle {  // closes an HDF5 id with the right function
  hid_t id;
  herr_t (*close)(hid_t);
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~Handle() {
    if (id >= 0) close(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id; }
};

hid_t open_object(hid_t file, const std::string& name) {
  return H5Oopen(file, name.c_str(), H5P_DEFAULT);
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  // Variable-length UTF-8, as h5py writes strings (h5py then reads them back as str, not bytes); Reader reads
  // these and the fixed-length strings of earlier files alike.
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  require(attr.id >= 0, "HDF5: cannot create attribute '", name, "'");
  const char* v = value.c_str();
  require(H5Awrite(attr, type, &v) >= 0, "HDF5: cannot write attribute '", name, "'");
}

void write_numeric_attr(hid_t obj, const std::string& name, hid_t type, const void* data, hsize_t n) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle space(n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle attr(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  require(attr.id >= 0, "HDF5: cannot create attribute '", name, "'");
  require(H5Awrite(attr, type, data) >= 0, "HDF5: cannot write attribute '", name, "'");
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// A writer killed before commit() (kill -9, out of memory, a node lost) leaves "<path>.tmp-<pid>" behind, and
// every further crash another one (a dataset's temporary can be gigabytes). The next Writer of the same path
// removes those whose process no longer exists on this host and which no process holds open (HDF5 locks the files
// it writes, so a live writer on another host sharing the directory keeps its file).
void remove_stale_temps(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = p.filename().string() + ".tmp-";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if (pid <= 0 || pid == long(::getpid())) continue;  // our own name: H5F_ACC_TRUNC reuses it
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // the writer may still be running
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const bool unused = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    std::error_code rm;
    if (unused) fs::remove(it->path(), rm);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------- Writer

Writer::Writer(const std::string& path, const std::string& kind, int format_version) : path_(path) {
  silence_hdf5();
  require(!path.empty(), "HDF5 output path is empty");
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent))
    fail("cannot write '", path, "': directory '", parent.string(), "' does not exist");
  remove_stale_temps(path);
  tmp_ = path + ".tmp-" + std::to_string(::getpid());
  file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  require(file_ >= 0, "cannot create HDF5 file '", tmp_, "': check that the directory is writable");
  set_attr("/", "attnphys_kind", kind);
  set_attr("/", "attnphys_format_version", long(format_version));
  set_attr("/", "attnphys_version", std::string(build::version));
  set_attr("/", "git_revision", std::string(build::git_revision));
  set_attr("/", "created_utc", utc_now());
}

Writer::~Writer() {
  if (file_ >= 0) H5Fclose(file_);
  if (!committed_) std::remove(tmp_.c_str());
}

void Writer::set_attr(const std::string& object, const std::string& name, const std::string& value) {
  Handle obj(open_object(file_, object), H5Oclose);
  require(obj.id >= 0, "HDF5: no object '", object, "' in ", tmp_, " to attach attribute '", name, "' to");
  write_string_attr(obj, name, value);
}
void Writer::set_attr(const std::string& object, const std::string& name, double value) {
  Handle obj(open_object(file_, object), H5Oclose);
  require(obj.id >= 0, "HDF5: no object '", object, "' to attach attribute '", name, "' to");
  write_numeric_attr(obj, name, H5T_NATIVE_DOUBLE, &value, 0);
}
void Writer::set_attr(const std::string& object, const std::string& name, long value) {
  Handle obj(open_object(file_, object), H5Oclose);
  require(obj.id >= 0, "HDF5: no object '", object, "' to attach attribute '", name, "' to");
  std::int64_t v = value;
  write_numeric_attr(obj, name, H5T_NATIVE_INT64, &v, 0);
}
void Writer::set_attr(const std::string& object, const std::string& name, const std::vector<double>& value) {
  Handle obj(open_object(file_, object), H5Oclose);
  require(obj.id >= 0, "HDF5: no object '", object, "' to attach attribute '", name, "' to");
  require(!value.empty(), "HDF5: empty list attribute '", name, "'");
  write_numeric_attr(obj, name, H5T_NATIVE_DOUBLE, value.data(), value.size());
}

void Writer::write_raw(const std::string& name, DType t, const void* data, const Shape& shape) {
  require(!committed_, "HDF5 writer for ", path_, " already committed");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle ds(H5Dcreate2(file_, name.c_str(), native(t), space, lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  require(ds.id >= 0, "HDF5: cannot create dataset '", name, "' in ", tmp_, " (does it exist already?)");
  hsize_t n = 1;
  for (auto d : dims) n *= d;
  if (n > 0) require(H5Dwrite(ds, native(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "HDF5: write of '", name,
                     "' failed (disk full?)");
}

void Writer::create_raw(const std::string& name, DType t, const Shape& shape, const Shape& chunk) {
  require(!shape.empty() && chunk.size() == shape.size(), "HDF5: dataset '", name,
          "' needs a chunk shape of the same rank as its shape");
  std::vector<hsize_t> dims(shape.begin(), shape.end()), ch(chunk.begin(), chunk.end());
  for (std::size_t i = 0; i < ch.size(); ++i) ch[i] = std::max<hsize_t>(1, std::min(ch[i], std::max<hsize_t>(dims[i], 1)));
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl, int(ch.size()), ch.data());
  Handle ds(H5Dcreate2(file_, name.c_str(), native(t), space, lcpl, dcpl, H5P_DEFAULT), H5Dclose);
  require(ds.id >= 0, "HDF5: cannot create chunked dataset '", name, "' in ", tmp_);
}

void Writer::write_rows_raw(const std::string& name, DType t, std::uint64_t first, std::uint64_t rows,
                            const void* data) {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  require(ds.id >= 0, "HDF5: no dataset '", name, "' to write rows into (create it first)");
  Handle fspace(H5Dget_space(ds), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(fspace);
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(fspace, dims.data(), nullptr);
  require(first + rows <= dims[0], "HDF5: rows [", first, ", ", first + rows, ") outside dataset '", name,
          "' with ", dims[0], " rows");
  if (rows == 0) return;
  std::vector<hsize_t> start(rank, 0), count(dims);
  start[0] = first;
  count[0] = rows;
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Handle mspace(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
  require(H5Dwrite(ds, native(t), mspace, fspace, H5P_DEFAULT, data) >= 0, "HDF5: writing rows of '", name,
          "' failed (disk full?)");
}

void Writer::commit() {
  require(!committed_, "HDF5 writer for ", path_, " committed twice");
  require(H5Fflush(file_, H5F_SCOPE_GLOBAL) >= 0, "HDF5: flushing ", tmp_, " failed");
  require(H5Fclose(file_) >= 0, "HDF5: closing ", tmp_, " failed");
  file_ = -1;
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  require(!ec, "cannot rename ", tmp_, " to ", path_, ": ", ec.message());
  committed_ = true;
}

// ---------------------------------------------------------------------------------------------------- Reader

void Reader::open(const std::string& path) {
  silence_hdf5();
  std::error_code ec;
  require(std::filesystem::exists(path, ec), "file '", path, "' does not exist");
  const auto size = std::filesystem::file_size(path, ec);
  htri_t is = H5Fis_hdf5(path.c_str());
  require(is > 0, "'", path, "' (", size, " bytes) is not an HDF5 file: it is empty, truncated at the start or of ",
          "another format");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  require(file_ >= 0, "cannot open '", path, "' (", size, " bytes) as HDF5: the file is truncated or corrupted; ",
          "regenerate it or use an earlier copy");
}

Reader::Reader(const std::string& path, const std::string& expected_kind, int max_version) : path_(path) {
  open(path);
  try {
    require_kind(expected_kind, max_version);
  } catch (...) {
    H5Fclose(file_);
    file_ = -1;
    throw;
  }
}

Reader::Reader(const std::string& path, AnyFile) : path_(path) { open(path); }

bool Reader::is_attnphys() const {
  return has_attr("/", "attnphys_kind") && has_attr("/", "attnphys_format_version");
}

void Reader::require_kind(const std::string& expected_kind, int max_version) const {
  if (!is_attnphys())
    fail("'", path_, "' is an HDF5 file but was not written by attnphys (no attnphys_kind attribute)",
         expected_kind.empty() ? "" : "; expected an attnphys " + expected_kind);
  const std::string k = kind();
  const long v = format_version();
  if (!expected_kind.empty() && k != expected_kind) fail("'", path_, "' is an attnphys ", k, ", not a ", expected_kind);
  if (v > max_version || v < 1)
    fail("'", path_, "' has ", k, " format version ", v, "; this attnphys reads versions 1 to ", max_version,
         v > max_version ? " (upgrade attnphys)" : "");
}

bool Reader::is_numeric_dataset(const std::string& name) const {
  if (name.empty() || !has(name)) return false;
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);  // fails (silently) on a group
  if (ds.id < 0) return false;
  Handle type(H5Dget_type(ds), H5Tclose);
  const H5T_class_t c = H5Tget_class(type);
  return c == H5T_FLOAT || c == H5T_INTEGER;
}

namespace {
// Link visitor: the names that open as datasets (groups and other objects do not).
#if H5_VERSION_GE(1, 12, 0)
herr_t collect_dataset(hid_t group, const char* name, const H5L_info2_t*, void* out) {
#else
herr_t collect_dataset(hid_t group, const char* name, const H5L_info_t*, void* out) {
#endif
  const hid_t ds = H5Dopen2(group, name, H5P_DEFAULT);
  if (ds >= 0) {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    H5Dclose(ds);
  }
  return 0;
}
}  // namespace

std::vector<std::string> Reader::datasets() const {
  std::vector<std::string> out;
#if H5_VERSION_GE(1, 12, 0)
  H5Lvisit2(file_, H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &out);
#else
  H5Lvisit(file_, H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &out);
#endif
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Reader::~Reader() {
  if (file_ >= 0) H5Fclose(file_);
}

bool Reader::has(const std::string& name) const {
  // H5Lexists needs each parent to exist; walk the path.
  std::string cur;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    std::size_t next = name.find('/', pos + 1);
    cur = name.substr(0, next);
    if (!cur.empty() && cur != "/" && H5Lexists(file_, cur.c_str(), H5P_DEFAULT) <= 0) return false;
    pos = next;
  }
  return true;
}

Shape Reader::shape(const std::string& name) const {
  require(has(name), "'", path_, "' has no dataset '", name, "'");
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  require(ds.id >= 0, "cannot open dataset '", name, "' in '", path_, "': the file is corrupted");
  Handle space(H5Dget_space(ds), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space);
  require(rank >= 0, "dataset '", name, "' in '", path_, "' has no readable shape");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  // A corrupted file can claim extents whose product wraps around: a reader would then allocate a small buffer for
  // a huge dataset. Refuse shapes of more than 2^59 elements (any element type then fits in 2^62 bytes).
  std::uint64_t n = 1;
  for (auto d : dims) {
    require(d == 0 || n <= (std::uint64_t(1) << 59) / d, "dataset '", name, "' in '", path_,
            "' claims an impossible shape: the file is corrupted");
    n *= d;
  }
  return Shape(dims.begin(), dims.end());
}

void Reader::read_raw(const std::string& name, DType t, void* out) const {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  require(ds.id >= 0, "cannot open dataset '", name, "' in '", path_, "'");
  require(H5Dread(ds, native(t), H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0, "reading dataset '", name, "' from '",
          path_, "' failed: the file is truncated or corrupted");
}

void Reader::read_rows_raw(const std::string& name, DType t, std::uint64_t first, std::uint64_t rows,
                           void* out) const {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
  require(ds.id >= 0, "cannot open dataset '", name, "' in '", path_, "'");
  Handle fspace(H5Dget_space(ds), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(fspace);
  require(rank >= 1, "dataset '", name, "' of '", path_, "' has no rows (rank ", rank, ")");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(fspace, dims.data(), nullptr);
  require(first + rows <= dims[0], "rows [", first, ", ", first + rows, ") outside dataset '", name, "' of '", path_,
          "'");
  if (rows == 0) return;
  std::vector<hsize_t> start(rank, 0), count(dims);
  start[0] = first;
  count[0] = rows;
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Handle mspace(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
  require(H5Dread(ds, native(t), mspace, fspace, H5P_DEFAULT, out) >= 0, "reading rows of '", name, "' from '",
          path_, "' failed: the file is truncated or corrupted");
}

namespace {
// An attribute read into one value must hold exactly one: H5Aread writes every element into the buffer, and a
// corrupted or foreign file may hold a list where attnphys expects one value.
void require_one_value(hid_t attr, const std::string& name, const std::string& path) {
  Handle space(H5Aget_space(attr), H5Sclose);
  const hssize_t n = space.id >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  require(n == 1, "attribute '", name, "' of '", path, "' holds ", n, " values where one is expected: the file is ",
          "corrupted or was not written by attnphys");
}
}  // namespace

bool Reader::has_attr(const std::string& object, const std::string& name) const {
  if (object != "/" && !has(object)) return false;
  return H5Aexists_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

std::string Reader::attr_string(const std::string& object, const std::string& name) const {
  require(has_attr(object, name), "'", path_, "' has no attribute '", name, "' on '", object, "'");
  Handle attr(H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  require(attr.id >= 0, "cannot open attribute '", name, "' of '", path_, "'");
  require_one_value(attr, name, path_);
  Handle type(H5Aget_type(attr), H5Tclose);
  require(H5Tget_class(type) == H5T_STRING, "attribute '", name, "' of '", path_, "' is not a string");
  if (H5Tis_variable_str(type) > 0) {  // written by h5py, for instance
    Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mtype, H5T_VARIABLE);
    H5Tset_cset(mtype, H5Tget_cset(type));
    char* s = nullptr;
    require(H5Aread(attr, mtype, &s) >= 0, "cannot read attribute '", name, "' of '", path_, "'");
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  const std::size_t n = H5Tget_size(type);
  require(n > 0 && n < (std::size_t(1) << 30), "attribute '", name, "' of '", path_, "' has an impossible string ",
          "size (", n, " bytes): the file is corrupted");
  std::string out(n, '\0');
  require(H5Aread(attr, type, out.data()) >= 0, "cannot read attribute '", name, "' of '", path_, "'");
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

double Reader::attr_double(const std::string& object, const std::string& name) const {
  require(has_attr(object, name), "'", path_, "' has no attribute '", name, "' on '", object, "'");
  Handle attr(H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  require(attr.id >= 0, "cannot open attribute '", name, "' of '", path_, "'");
  require_one_value(attr, name, path_);
  double v = 0;
  require(H5Aread(attr, H5T_NATIVE_DOUBLE, &v) >= 0, "cannot read attribute '", name, "' of '", path_, "'");
  return v;
}

long Reader::attr_long(const std::string& object, const std::string& name) const {
  require(has_attr(object, name), "'", path_, "' has no attribute '", name, "' on '", object, "'");
  Handle attr(H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  require(attr.id >= 0, "cannot open attribute '", name, "' of '", path_, "'");
  require_one_value(attr, name, path_);
  std::int64_t v = 0;
  require(H5Aread(attr, H5T_NATIVE_INT64, &v) >= 0, "cannot read attribute '", name, "' of '", path_, "'");
  return long(v);
}

std::vector<double> Reader::attr_doubles(const std::string& object, const std::string& name) const {
  require(has_attr(object, name), "'", path_, "' has no attribute '", name, "' on '", object, "'");
  Handle attr(H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  Handle space(H5Aget_space(attr), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<double> v(n > 0 ? n : 0);
  if (n > 0) require(H5Aread(attr, H5T_NATIVE_DOUBLE, v.data()) >= 0, "cannot read attribute '", name, "'");
  return v;
}

// ---------------------------------------------------------------------------------------------------- parameters

namespace {
std::string block_table(const std::vector<ParameterBlock>& blocks) {
  std::string s;
  for (const auto& b : blocks) {
    s += b.name + ":";
    for (std::size_t i = 0; i < b.shape.size(); ++i) s += (i ? "x" : "") + std::to_string(b.shape[i]);
    s += "\n";
  }
  return s;
}
}  // namespace

template <class T>
void write_parameters(Writer& w, const std::string& group, const ParameterBuffer<T>& p, bool optimizer_state) {
  w.write<T>(group + "/params", p.get_host(Slot::Params));
  w.set_attr(group + "/params", "blocks", block_table(p.blocks()));
  if (optimizer_state) {
    w.write<T>(group + "/moment1", p.get_host(Slot::Moment1));
    w.write<T>(group + "/moment2", p.get_host(Slot::Moment2));
  }
}

template <class T>
void read_parameters(const Reader& r, const std::string& group, ParameterBuffer<T>& p, bool optimizer_state) {
  const std::string name = group + "/params";
  require(r.has(name), "'", r.path(), "' has no parameters under '", group, "'");
  const std::string stored = r.attr_string(name, "blocks");
  const std::string expected = block_table(p.blocks());
  require(stored == expected, "the parameters in '", r.path(), "' do not fit this model.\nIn the file:\n", stored,
          "The model has:\n", expected, "Build the model with the configuration stored in the file.");
  // The sizes first: a corrupted file may claim any extent, and reading it whole would allocate that much.
  auto check_size = [&](const std::string& ds) {
    const Shape s = r.shape(ds);
    require(s.size() == 1 && s[0] == std::uint64_t(p.size()), "'", r.path(), "': dataset '", ds, "' holds ",
            s.size() == 1 ? std::to_string(s[0]) : "a rank-" + std::to_string(s.size()) + " array of", " values but ",
            "its block table lists ", p.size(), " parameters: the file is corrupted");
  };
  check_size(name);
  p.set_host(r.read<T>(name), Slot::Params);
  if (optimizer_state) {
    require(r.has(group + "/moment1") && r.has(group + "/moment2"), "'", r.path(),
            "' has no optimizer state under '", group, "'");
    check_size(group + "/moment1");
    check_size(group + "/moment2");
    p.set_host(r.read<T>(group + "/moment1"), Slot::Moment1);
    p.set_host(r.read<T>(group + "/moment2"), Slot::Moment2);
  }
}

template void write_parameters<float>(Writer&, const std::string&, const ParameterBuffer<float>&, bool);
template void write_parameters<double>(Writer&, const std::string&, const ParameterBuffer<double>&, bool);
template void read_parameters<float>(const Reader&, const std::string&, ParameterBuffer<float>&, bool);
template void read_parameters<double>(const Reader&, const std::string&, ParameterBuffer<double>&, bool);

}  // namespace attnphys::h5
