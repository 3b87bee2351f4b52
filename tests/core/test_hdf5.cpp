// HDF5 I/O: bit-exact round trips, temp-file-and-rename, and clear refusals of truncated, foreign and
// wrong-version files.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/random.hpp"
#include "scratch.hpp"

using namespace attnphys;
namespace fs = std::filesystem;

namespace {
std::string tmp_path(const std::string& name) {
  fs::path dir = attnphys::test::scratch_dir("hdf5");
  fs::create_directories(dir);
  return (dir / name).string();
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
void write_sample(const std::string& path) {
  h5::Writer w(path, "checkpoint", 1);
  std::vector<double> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = std::sin(i) * 1e3;
  w.write<double>("/data/values", v.data(), {10, 100});
  w.commit();
}
}  // namespace

TEST(Hdf5, ViewRoundTripIsBitExact) {
  const auto path = tmp_path("views.h5");
  View3<double> a("a", 4, 5, 6);
  View2<float> b("b", 7, 3);
  fill_normal(a, 3, 0, 0.0, 1e-300);  // tiny values (and subnormal products) must survive
  fill_normal(b, 3, 1);
  auto ha = to_host(a);
  ha(0, 0, 0) = std::numeric_limits<double>::denorm_min();
  ha(1, 2, 3) = -0.0;
  ha(3, 4, 5) = std::numeric_limits<double>::max();
  Kokkos::deep_copy(a, ha);
  {
    h5::Writer w(path, "views", 1);
    h5::write_view(w, "/group/a", a);
    h5::write_view(w, "/b", b);
    w.set_attr("/", "config", std::string("[x]\ny = 1\n"));
    w.set_attr("/b", "dx", 0.25);
    w.commit();
  }
  View3<double> a2("a2", 4, 5, 6);
  View2<float> b2("b2", 7, 3);
  h5::Reader r(path, "views", 1);
  h5::read_view(r, "/group/a", a2);
  h5::read_view(r, "/b", b2);
  auto h1 = to_host(a), h2 = to_host(a2);
  EXPECT_EQ(std::memcmp(h1.data(), h2.data(), sizeof(double) * h1.size()), 0);
  auto g1 = to_host(b), g2 = to_host(b2);
  EXPECT_EQ(std::memcmp(g1.data(), g2.data(), sizeof(float) * g1.size()), 0);
  EXPECT_EQ(r.attr_string("/", "config"), "[x]\ny = 1\n");
  EXPECT_EQ(r.attr_double("/b", "dx"), 0.25);
  EXPECT_EQ(r.kind(), "views");
  EXPECT_EQ(r.format_version(), 1);
  View2<float> wrong("w", 3, 7);
  auto e = error_of([&] { h5::read_view(r, "/b", wrong); });
  EXPECT_NE(e.find("has shape 7x3, expected 3x7"), std::string::npos) << e;
}

TEST(Hdf5, ParametersRoundTripAndModelMismatch) {
  const auto path = tmp_path("params.h5");
  ParameterBuffer<double> p;
  p.add("w", {3, 4});
  p.add("b", {4}, false);
  p.allocate();
  fill_normal(p.flat(Slot::Params), 1, 0);
  fill_normal(p.flat(Slot::Moment1), 1, 1);
  fill_normal(p.flat(Slot::Moment2), 1, 2);
  {
    h5::Writer w(path, "checkpoint", 1);
    h5::write_parameters(w, "/model", p, true);
    w.commit();
  }
  ParameterBuffer<double> q;
  q.add("w", {3, 4});
  q.add("b", {4}, false);
  q.allocate();
  h5::Reader r(path, "checkpoint", 1);
  h5::read_parameters(r, "/model", q, true);
  EXPECT_EQ(p.get_host(), q.get_host());
  EXPECT_EQ(p.get_host(Slot::Moment1), q.get_host(Slot::Moment1));
  EXPECT_EQ(p.get_host(Slot::Moment2), q.get_host(Slot::Moment2));
  ParameterBuffer<double> other;
  other.add("w", {4, 3});
  other.add("b", {4}, false);
  other.allocate();
  auto e = error_of([&] { h5::read_parameters(r, "/model", other, false); });
  EXPECT_NE(e.find("do not fit this model"), std::string::npos) << e;
}

TEST(Hdf5, UncommittedWriteLeavesPreviousFileIntact) {
  const auto path = tmp_path("atomic.h5");
  write_sample(path);
  const auto size_before = fs::file_size(path);
  try {
    h5::Writer w(path, "checkpoint", 1);
    std::vector<double> v(10, 1.0);
    w.write<double>("/other", v.data(), {10});
    throw std::runtime_error("simulated crash mid-write");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(fs::file_size(path), size_before);
  h5::Reader r(path, "checkpoint", 1);
  EXPECT_TRUE(r.has("/data/values"));
  EXPECT_FALSE(r.has("/other"));
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << "left behind: " << entry.path();
}

TEST(Hdf5, TruncatedFileIsRefused) {
  const auto path = tmp_path("full.h5"), cut = tmp_path("cut.h5");
  write_sample(path);
  const auto size = fs::file_size(path);
  for (double frac : {0.0, 0.1, 0.5, 0.9}) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes(size);
    in.read(bytes.data(), size);
    std::ofstream out(cut, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(size * frac));
    out.close();
    auto e = error_of([&] {
      h5::Reader r(cut, "checkpoint", 1);
      r.read<double>("/data/values");
    });
    EXPECT_FALSE(e.empty()) << "truncated to " << frac << " was accepted";
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("not an HDF5") != std::string::npos) << e;
  }
}

TEST(Hdf5, ForeignWrongKindAndWrongVersionAreRefused) {
  const auto foreign = tmp_path("foreign.h5");
  {
    hid_t f = H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
  }
  auto e = error_of([&] { h5::Reader r(foreign, "checkpoint", 1); });
  EXPECT_NE(e.find("not written by attnphys"), std::string::npos) << e;

  const auto text = tmp_path("text.h5");
  std::ofstream(text) << "this is not hdf5\n";
  e = error_of([&] { h5::Reader r(text, "checkpoint", 1); });
  EXPECT_NE(e.find("not an HDF5 file"), std::string::npos) << e;

  const auto path = tmp_path("v.h5");
  write_sample(path);
  e = error_of([&] { h5::Reader r(path, "dataset", 1); });
  EXPECT_NE(e.find("is an attnphys checkpoint, not a dataset"), std::string::npos) << e;
  {
    h5::Writer w(path, "checkpoint", 7);
    w.commit();
  }
  e = error_of([&] { h5::Reader r(path, "checkpoint", 1); });
  EXPECT_NE(e.find("format version 7"), std::string::npos) << e;
  e = error_of([&] { h5::Reader r(tmp_path("missing.h5"), "checkpoint", 1); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
}

TEST(Hdf5, StreamedRowsEqualWholeWrite) {
  const auto path = tmp_path("rows.h5");
  std::vector<float> all(12 * 5);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = float(i) * 0.5f;
  {
    h5::Writer w(path, "dataset", 1);
    w.create<float>("/data", {12, 5}, {4, 5});
    for (int c = 0; c < 3; ++c) w.write_rows<float>("/data", c * 4, 4, all.data() + c * 20);
    EXPECT_THROW(w.write_rows<float>("/data", 10, 4, all.data()), Error);
    w.commit();
  }
  h5::Reader r(path, "dataset", 1);
  h5::Shape s;
  auto back = r.read<float>("/data", &s);
  EXPECT_EQ(s, (h5::Shape{12, 5}));
  EXPECT_EQ(back, all);
  std::vector<float> rows(2 * 5);
  r.read_rows<float>("/data", 5, 2, rows.data());
  EXPECT_EQ(rows[0], all[25]);
}
