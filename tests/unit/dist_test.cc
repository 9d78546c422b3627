// Several processes: the launch variables, the split of batches, the collectives of a world of one,
// and the launcher (with /bin/sh children). Collectives across real processes: tests/e2e/distributed.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "headprune/util/dist.h"
#include "headprune/util/launch.h"
#include "test_util.h"

namespace hp {
namespace {

// Sets launch variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

const std::optional<std::string> kUnset = std::nullopt;

TEST(Dist, ReadsTheTorchrunVariables) {
  {
    ScopedEnv env({{"RANK", kUnset}, {"WORLD_SIZE", kUnset}, {"LOCAL_RANK", kUnset}, {"LOCAL_WORLD_SIZE", kUnset},
                   {"MASTER_ADDR", kUnset}, {"MASTER_PORT", kUnset}});
    const auto e = dist::env_from_environment();
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.world_size, 1);
    EXPECT_EQ(e.master_port, 29500);
  }
  ScopedEnv env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}});
  const auto e = dist::env_from_environment();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_EQ(e.store_file, "");
  ScopedEnv launched({{std::string(dist::kStoreFileVariable), "/tmp/headprune-launch-x/store"}});
  EXPECT_EQ(dist::env_from_environment().store_file, "/tmp/headprune-launch-x/store");
}

TEST(Dist, BadVariablesAreNamed) {
  const std::vector<std::pair<std::map<std::string, std::optional<std::string>>, std::string>> cases = {
      {{{"WORLD_SIZE", "2"}, {"RANK", "2"}}, "RANK='2'"},
      {{{"WORLD_SIZE", "two"}, {"RANK", "0"}}, "WORLD_SIZE='two'"},
      {{{"WORLD_SIZE", "2"}, {"RANK", kUnset}}, "RANK is not set"},
      {{{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT='70000'"},
      {{{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_WORLD_SIZE", "3"}}, "LOCAL_WORLD_SIZE='3'"},
  };
  for (const auto& [vars, expected] : cases) {
    ScopedEnv env(vars);
    try {
      dist::env_from_environment();
      ADD_FAILURE() << "accepted " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(Dist, AWorldOfOneOwnsEverythingAndItsCollectivesChangeNothing) {
  ASSERT_EQ(dist::world_size(), 1);
  EXPECT_TRUE(dist::is_main());
  EXPECT_TRUE(dist::owns(0) && dist::owns(7));
  EXPECT_EQ(dist::slice(5), std::make_pair(int64_t{0}, int64_t{5}));
  auto t = torch::arange(4, torch::kFloat);
  dist::all_reduce_sum({t});
  EXPECT_TRUE(t.equal(torch::arange(4, torch::kFloat)));
  EXPECT_EQ(dist::all_reduce_sum(2.5), 2.5);
  EXPECT_EQ(dist::all_gather("x"), std::vector<std::string>{"x"});
  dist::barrier();
  dist::init(dist::Env{}, std::chrono::milliseconds(1000));  // a world of one joins nothing
  EXPECT_FALSE(dist::active());
}

TEST(Launch, GivesEachChildItsRankAndSucceedsWhenAllDo) {
  LaunchOptions o;
  o.nproc = 3;
  o.argv = {"/bin/sh", "-c",
            "test \"$WORLD_SIZE\" = 3 && test \"$LOCAL_WORLD_SIZE\" = 3 && test \"$RANK\" = \"$LOCAL_RANK\" && "
            "test \"$RANK\" -ge 0 && test \"$RANK\" -lt 3 && test \"$MASTER_ADDR\" = 127.0.0.1 && "
            "test \"$MASTER_PORT\" -gt 0"};
  EXPECT_EQ(launch(o), 0);
}

TEST(Launch, StopsTheOthersWhenOneFailsAndReturnsItsStatus) {
  LaunchOptions o;
  o.nproc = 2;
  o.grace_s = 2;
  std::vector<std::string> notes;
  o.note = [&](const std::string& s) { notes.push_back(s); };
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"};
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(launch(o), 3);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  bool named = false;
  for (const auto& n : notes) named = named || n.find("process 1") != std::string::npos;
  EXPECT_TRUE(named);
  // Killed by a signal: 128 + its number.
  o.argv = {"/bin/sh", "-c", "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 60"};
  EXPECT_EQ(launch(o), 128 + 9);
}

TEST(Launch, ChildrenMeetInAPrivateDirectoryThatIsRemovedAtTheEnd) {
  // The rendezvous was LibTorch's TCP store, listening on every interface; now a file in a directory
  // of the launch's own (tests/e2e/distributed.sh checks the sockets of a real run).
  test::TempDir tmp;
  ScopedEnv env({{std::string(dist::kStoreFileVariable), "/inherited/from/the/parent"}});
  LaunchOptions o;
  o.nproc = 2;
  o.argv = {"/bin/sh", "-c",
            "d=$(dirname \"$HP_DIST_STORE_FILE\") && test -d \"$d\" && test \"$(stat -c %a:%u \"$d\")\" = "
            "\"700:$(id -u)\" && test ! -e \"$HP_DIST_STORE_FILE\" && echo \"$HP_DIST_STORE_FILE\" > " +
                tmp.path + "/rank$RANK"};
  ASSERT_EQ(launch(o), 0);
  const auto read = [&](const std::string& name) {
    std::ifstream in(tmp / name);
    std::string line;
    std::getline(in, line);
    return line;
  };
  const std::string store = read("rank0");
  EXPECT_EQ(store, read("rank1"));
  EXPECT_NE(store.find("/headprune-launch-"), std::string::npos) << store;
  EXPECT_FALSE(std::filesystem::exists(store.substr(0, store.rfind('/'))));
  // Each launch has its own, removed also when a child fails.
  o.argv = {"/bin/sh", "-c", "echo \"$HP_DIST_STORE_FILE\" > " + tmp.path + "/again$RANK; exit 3"};
  EXPECT_EQ(launch(o), 3);
  const std::string again = read("again0");
  EXPECT_NE(again, store);
  EXPECT_FALSE(std::filesystem::exists(again.substr(0, again.rfind('/'))));
}

TEST(Launch, RefusesBadOptions) {
  LaunchOptions o;
  EXPECT_THROW(launch(o), std::invalid_argument);  // no command
  o.argv = {"/bin/true"};
  o.nproc = 0;
  EXPECT_THROW(launch(o), std::invalid_argument);
  o.nproc = 1;
  o.argv = {"/no/such/program"};
  EXPECT_EQ(launch(o), 127);
  // Issue 78: a launch inside a launch's child ran every job once per outer process.
  ScopedEnv child({{"HP_LAUNCHED_BY", std::to_string(::getppid())}, {"RANK", std::string("1")},
                   {"WORLD_SIZE", std::string("2")}});
  o.argv = {"/bin/true"};
  try {
    launch(o);
    ADD_FAILURE() << "a nested launch ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("launch: this process is already rank 1 of 2 started by launch"),
              std::string::npos) << e.what();
  }
  // The same variable left by a launcher that has ended does not stop a launch.
  ScopedEnv stale({{"HP_LAUNCHED_BY", std::string("999999999")}});
  EXPECT_EQ(launch(o), 0);
}

}  // namespace
}  // namespace hp
