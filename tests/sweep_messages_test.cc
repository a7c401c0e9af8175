// The messages of `mpirun ringbench sweep` through the store: each is checked before use.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/errors.h"
#include "runner/sweep/sweep_messages.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

json good_result() { return {{"code", 0}, {"timed_out", false}, {"interrupted", false}, {"wall_s", 1.5}, {"log", "ok\n"}}; }

std::string result_error(const json& res) {
  try {
    point_result(res.dump(), "sweep/res/3/1", 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(SweepMessages, APointResultIsCheckedFieldByField) {
  EXPECT_EQ(point_result(good_result().dump(), "k", 1)["wall_s"], 1.5);
  const std::string prefix = "sweep rank 1 sent a bad sweep/res/3/1: ";
  EXPECT_EQ(result_error(json::array()), prefix + "not a JSON object");
  try {
    point_result("{\"code\": 0,", "sweep/res/3/1", 1);
    FAIL() << "truncated JSON accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), prefix + "not a JSON object");
  }
  json r = good_result();
  r["code"] = 256;
  EXPECT_EQ(result_error(r), prefix + "\"code\" is not an exit code");
  r = good_result();
  r["code"] = "0";
  EXPECT_EQ(result_error(r), prefix + "\"code\" is not an exit code");
  r = good_result();
  r.erase("interrupted");
  EXPECT_EQ(result_error(r), prefix + "\"interrupted\" is not true or false");
  r = good_result();
  r["wall_s"] = -1;
  EXPECT_EQ(result_error(r), prefix + "\"wall_s\" is not a duration");
  r = good_result();
  r["log"] = std::string((1u << 20) + 1, 'x');
  EXPECT_EQ(result_error(r), prefix + "\"log\" is not a string of at most 1 MiB");
}

TEST(SweepMessages, ACommandNamesAPointOfThisSweepAStoreAndAJobId) {
  const json run = {{"op", "run"}, {"point", 2}, {"store", "10.0.0.1:29500"}, {"job", "0123456789abcdef"}};
  const PointCommand pc = parse_command(run, 7, 3);
  EXPECT_FALSE(pc.done);
  EXPECT_EQ(pc.index, 2u);
  EXPECT_EQ(pc.store, "10.0.0.1:29500");
  EXPECT_TRUE(parse_command({{"op", "done"}}, 8, 3).done);
  const auto error = [](const json& cmd) {
    try {
      parse_command(cmd, 7, 3);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  json c = run;
  c["point"] = 3;
  EXPECT_EQ(error(c), "sweep command 7 from rank 0: point 3 is not one of this sweep's 3");
  c = run;
  c["point"] = -1;
  EXPECT_NE(error(c).find("point -1 is not one of"), std::string::npos);
  c = run;
  c["op"] = "exec";
  EXPECT_EQ(error(c), "sweep command 7 from rank 0: unknown op \"exec\"");
  c = run;
  c["job"] = "../../etc/passwd";
  EXPECT_NE(error(c).find("is not 16 hex digits"), std::string::npos);
  c = run;
  c["store"] = "no-port";
  EXPECT_NE(error(c), "accepted");
  c = run;
  c.erase("store");
  EXPECT_EQ(error(c), "sweep command 7 from rank 0: no store address");
}

TEST(SweepMessages, HostNamesForMpirunAreNamesNotOptionsOrShell) {
  for (const char* ok : {"g0", "node-1.cluster.local", "10.77.0.1", "a_b"}) EXPECT_TRUE(valid_host_name(ok)) << ok;
  for (const std::string& bad : {std::string(), std::string("-np"), std::string("a,b"), std::string("a b"),
                                std::string("$(reboot)"), std::string("a;b"), std::string(254, 'a')})
    EXPECT_FALSE(valid_host_name(bad)) << bad;
}

}  // namespace
}  // namespace ringbench
