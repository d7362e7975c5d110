// Peer liveness without UCX: the host id is stable and this namespace's, a pid probe tells a
// live process from an exited one, and shared-memory transports are known not to report peer
// failures.
#include "lib/transport/peer_liveness.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace yoco {
namespace {

TEST(PeerLivenessTest, HostIdIsStableAndShared) {
  EXPECT_NE(HostId(), 0u);
  EXPECT_EQ(HostId(), HostId());
  // A child in the same PID namespace computes the same id.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const uint64_t id = HostId();
    _exit(write(fds[1], &id, sizeof id) == sizeof id ? 0 : 1);
  }
  uint64_t from_child = 0;
  ASSERT_EQ(read(fds[0], &from_child, sizeof from_child), static_cast<ssize_t>(sizeof from_child));
  waitpid(child, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(from_child, HostId());
}

TEST(PeerLivenessTest, AnExitedProcessIsGoneALiveOneIsNot) {
  EXPECT_FALSE(ProcessGone(static_cast<uint32_t>(getpid())));
  EXPECT_FALSE(ProcessGone(0));  // unknown: never called gone
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: its pid names nobody now
  EXPECT_TRUE(ProcessGone(static_cast<uint32_t>(child)));
}

TEST(PeerLivenessTest, SharedMemoryTransportsReportNoPeerFailures) {
  EXPECT_TRUE(UcxDetectsPeerFailure("tcp"));
  EXPECT_TRUE(UcxDetectsPeerFailure("rc,ud"));
  EXPECT_TRUE(UcxDetectsPeerFailure("smx,tcp"));  // a name that only starts like one
  EXPECT_FALSE(UcxDetectsPeerFailure("sm"));
  EXPECT_FALSE(UcxDetectsPeerFailure("tcp,posix"));
  EXPECT_FALSE(UcxDetectsPeerFailure("cma,tcp"));
  EXPECT_FALSE(UcxDetectsPeerFailure("tcp,sysv,rc"));
}

}  // namespace
}  // namespace yoco
