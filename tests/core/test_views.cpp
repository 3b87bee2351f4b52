// Default-constructed views, the way the solvers hold them (locals, std::array members, arrays of structs): they
// must own nothing until assigned. GCC 12.2-12.4 with Kokkos develop before 4.7.00 folds the tracker of such views
// to a null record marked "tracked" (kokkos/kokkos#8187); the first assignment or destructor then segfaults. The
// build works around it (cmake/attnphysDependencies.cmake); this test is what notices when it does not.
#include <gtest/gtest.h>

#include <array>

#include "attnphys/core/views.hpp"

using namespace attnphys;

namespace {

struct Holder {
  Holder() {}  // user-provided: members default-initialised, as in the solver classes
  std::array<View3<double>, 3> per_axis;
  std::array<HostView1<double>, 2> host;
  struct Pair {
    double s = -1;
    View1<double> a, b;
  };
  std::array<Pair, 2> pairs;
};

}  // namespace

TEST(Views, DefaultConstructedViewsOwnNothing) {
  View2<double> local;
  HostView3<double> host_local;
  EXPECT_EQ(local.use_count(), 0);
  EXPECT_EQ(host_local.use_count(), 0);
  EXPECT_EQ(local.label(), "");
  EXPECT_EQ(local.data(), nullptr);

  Holder h;
  for (const auto& v : h.per_axis) EXPECT_EQ(v.use_count(), 0);
  for (const auto& v : h.host) EXPECT_EQ(v.label(), "");
  for (const auto& p : h.pairs) {
    EXPECT_EQ(p.a.use_count(), 0);
    EXPECT_EQ(p.b.label(), "");
  }
}

TEST(Views, AssigningToDefaultConstructedViewsCountsReferences) {
  View1<double> a("attnphys::test_a", 4);
  View1<double> b;
  b = a;  // releases b's (empty) record first
  EXPECT_EQ(a.use_count(), 2);
  EXPECT_EQ(b.label(), "attnphys::test_a");

  Holder h;
  h.per_axis[1] = View3<double>("attnphys::test_axis", 2, 3, 4);
  h.pairs[0].a = a;
  EXPECT_EQ(a.use_count(), 3);
  EXPECT_EQ(h.per_axis[1].use_count(), 1);
  EXPECT_EQ(h.per_axis[1].extent(2), 4u);
  h.pairs[0].a = View1<double>();
  EXPECT_EQ(a.use_count(), 2);
}
