// The one rule by which ringbench waits for the processes it starts (runner/job/launcher.h):
// `--ranks N`'s local ranks and a sweep point's ranks both reap through it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <chrono>
#include <string>
#include <vector>

#include "runner/job/launcher.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A child running `sh -c script`.
pid_t start_shell(const std::string& script) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(Launcher, AFailureGivesTheOthersTheGraceThenKillsThem) {
  const auto start = Clock::now();
  std::vector<KillCause> causes;
  const Reaped r = reap_processes({start_shell("exit 3"), start_shell("exec sleep 30")}, ReapRule{.grace = 300ms},
                                  [&](KillCause c, const std::vector<pid_t>&) { causes.push_back(c); });
  EXPECT_EQ(r.exit_codes, (std::vector<int>{3, 128 + SIGKILL}));
  EXPECT_EQ(r.first_failure, 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(causes, std::vector<KillCause>{KillCause::failure});
  EXPECT_LT(seconds_since(start), 20.0);  // not the sleeper's 30 s
}

TEST(Launcher, ProcessesThatSucceedAreWaitedForWithoutAKill) {
  bool killed = false;
  const Reaped r = reap_processes({start_shell("sleep 0.2"), start_shell("exit 0")}, ReapRule{.grace = 10ms},
                                  [&](KillCause, const std::vector<pid_t>&) { killed = true; });
  EXPECT_EQ(r.exit_codes, (std::vector<int>{0, 0}));
  EXPECT_EQ(r.first_failure, 0);
  EXPECT_FALSE(killed);
}

TEST(Launcher, TheDeadlineTermsProcessGroupsAndSaysItTimedOut) {
  // Its own process group, as run_ranks starts a rank: SIGTERM to the group first.
  const pid_t pid = start_shell("exec sleep 30");
  setpgid(pid, pid);
  const Reaped r = reap_processes({pid}, ReapRule{.grace = 10ms, .deadline = Clock::now() + 200ms, .groups = true});
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_codes, std::vector<int>{128 + SIGTERM});
}

TEST(Launcher, AStopKillsEverythingAsInterrupted) {
  std::atomic<bool> stop{true};
  const Reaped r = reap_processes({start_shell("exec sleep 30")}, ReapRule{.grace = 10s, .stop = &stop});
  EXPECT_TRUE(r.interrupted);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_codes, std::vector<int>{128 + SIGKILL});
}

TEST(Launcher, AHelperStillRunningTheGraceAfterTheEssentialOnesEndedIsKilled) {
  std::vector<pid_t> running_at_kill;
  const Reaped r = reap_processes({start_shell("exit 0"), start_shell("exec sleep 30")},
                                  ReapRule{.grace = 200ms, .essential = 1},
                                  [&](KillCause c, const std::vector<pid_t>& running) {
                                    EXPECT_EQ(c, KillCause::essential_ended);
                                    running_at_kill = running;
                                  });
  EXPECT_EQ(r.exit_codes, (std::vector<int>{0, 128 + SIGKILL}));
  EXPECT_EQ(r.first_failure, 128 + SIGKILL);  // the job fails
  ASSERT_EQ(running_at_kill.size(), 2u);
  EXPECT_EQ(running_at_kill[0], 0);  // reaped
  EXPECT_GT(running_at_kill[1], 0);
}

TEST(Launcher, StartProcessSetsTheEnvironmentTheLogAndTheGroup) {
  const std::string log = ::testing::TempDir() + "launcher_test.log";
  RankLaunch own;
  own.argv = {"/bin/sh", "-c", "echo to the log; exit $RB_LAUNCHER_TEST"};
  own.env = {"RB_LAUNCHER_TEST=7"};
  own.log_path = log;
  const pid_t a = start_process(own);
  EXPECT_EQ(getpgid(a), a);  // a group of its own
  RankLaunch ours;
  ours.argv = {"sh", "-c", "exec sleep 30"};
  ours.exe = "/bin/sh";
  ours.own_group = false;
  const pid_t b = start_process(ours);
  EXPECT_EQ(getpgid(b), getpgrp());  // stays in ours
  kill(b, SIGKILL);
  const Reaped r = reap_processes({a, b}, ReapRule{.grace = 10s});
  EXPECT_EQ(r.exit_codes, (std::vector<int>{7, 128 + SIGKILL}));
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "to the log\n");
}

}  // namespace
}  // namespace ringbench
