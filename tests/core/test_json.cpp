#include <gtest/gtest.h>

#include <cmath>

#include "attnphys/core/json.hpp"

using namespace attnphys;

TEST(Json, ObjectsArraysEscapesAndNonFinite) {
  Json j = Json::object();
  j.set("a", 1).set("b", 2.5).set("s", "x\"y\n").set("list", std::vector<int>{1, 2});
  j.set("nan", std::nan("")).set("a", true);  // replacing keeps position
  EXPECT_EQ(j.dump(), "{\"a\": true, \"b\": 2.5, \"s\": \"x\\\"y\\n\", \"list\": [1, 2], \"nan\": null}");
}
