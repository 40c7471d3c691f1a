// SPDX-License-Identifier: MIT
// Least privilege end to end (docs/config.md "Privileges", docs/control.md "Credentials"): a cell
// whose worker runs as nobody, socket modes and groups that decide which users may call a cell or
// read status, and a non-root bulkheadctl refused `stop` with its documented exit code. Runs
// bulkheadctl as nobody through setpriv(1) (util-linux). Needs root: skipped otherwise.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::StartsWith;

#define SKIP_UNLESS_ROOT()                                            \
  if (::geteuid() != 0)                                               \
  GTEST_SKIP() << "these tests switch to user nobody and need root; " \
                  "run them as root to cover them"

// bulkheadctl as nobody:nogroup with no supplementary groups.
ProcessResult CtlAsNobody(Harness& h, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",   "--clear-groups", "--",
      BulkheadctlPath(),  "--socket",      h.control_socket()};
  argv.insert(argv.end(), args.begin(), args.end());
  Result<ProcessResult> run = RunProcess(argv);
  if (!run.ok()) {
    ADD_FAILURE() << "cannot run setpriv: " << run.status().message();
    return ProcessResult{};
  }
  return std::move(run).value();
}

// The harness's directory is made by mkdtemp (0700): nobody needs to pass through it.
void OpenToOthers(Harness& h) { ASSERT_EQ(::chmod(h.dir().c_str(), 0755), 0); }

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

gid_t GroupOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_gid;
}

// connect(2) to the Unix socket at `path` from a child running as nobody:nogroup with no
// supplementary groups: 0 when accepted, else the errno (EACCES: the file's mode refused it).
int ConnectAsNobody(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) {  // async-signal-safe calls only: the test runs threads
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(255);
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) ::_exit(254);
    ::_exit(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno);
  }
  testing::ChildGuard child(pid);
  std::optional<int> status = child.WaitExit();
  if (!status || !WIFEXITED(*status)) return -1;
  return WEXITSTATUS(*status);
}

// Sets the test process's umask for a scope (bulkheadd, its child, inherits it).
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

std::vector<std::string> Lines(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (line.starts_with(prefix)) lines.push_back(line.substr(prefix.size()));
    start = end + 1;
  }
  return lines;
}

TEST(Privilege, WorkerRunsAsNobodyAndCanStillNotify) {
  SKIP_UNLESS_ROOT();
  // Something in bulkheadd's own environment that must not reach the worker.
  ASSERT_EQ(::setenv("BULKHEAD_TEST_SUPERVISOR_SECRET", "leak", 1), 0);
  CellSpec cell{.name = "jail",
                .command = {TestWorkerPath(), "--notify-ready-after-ms", "0"},
                .environment = {{"GREETING", "hello"}, {"HOME", "/srv/jail"}},
                .extra_toml = "user = \"nobody\"\nready = \"notify\"\numask = \"0027\"\n"};
  Harness h(TestOptions({cell}));
  OpenToOthers(h);
  Status started = h.Start();
  ::unsetenv("BULKHEAD_TEST_SUPERVISOR_SECRET");
  ASSERT_TRUE(started.ok()) << started.message();  // "running" needs READY=1 from nobody

  Result<ipc::Client::Reply> reply = h.Call("jail", "self");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  const std::string& self = reply->payload;
  EXPECT_THAT(self, HasSubstr("Uid:\t65534\t65534\t65534\t65534\n"));
  EXPECT_THAT(self, HasSubstr("Gid:\t65534\t65534\t65534\t65534\n"));
  EXPECT_THAT(self, ::testing::ContainsRegex("\nGroups:[ \t]*\n"));  // none
  EXPECT_THAT(self, HasSubstr("Umask:\t0027\n"));
  EXPECT_THAT(self, HasSubstr("NoNewPrivs:\t1\n"));
  EXPECT_THAT(self, HasSubstr("SigBlk:\t0000000000000000\n"));
  EXPECT_THAT(self, HasSubstr("SigIgn:\t0000000000000000\n"));
  EXPECT_THAT(self, HasSubstr("Fds:\t0 1 2 3\n"));
  const std::vector<std::string> env = Lines(self, "Env:\t");
  const std::string notify = "NOTIFY_SOCKET=" + h.runtime_dir() + "/jail.notify";
  EXPECT_THAT(
      env, ::testing::UnorderedElementsAre(
               "GREETING=hello", "HOME=/srv/jail", StartsWith("PATH="), notify, "USER=nobody",
               "LOGNAME=nobody", "SHELL=/usr/sbin/nologin", "LISTEN_FDS=1", "LISTEN_FDNAMES=jail",
               StartsWith("LISTEN_PID="), "BULKHEAD_MAX_PAYLOAD_BYTES=4194304"))
      << self;

  // Only the worker's user (and root) may write to its notify socket.
  const std::string notify_path = h.runtime_dir() + "/jail.notify";
  EXPECT_EQ(ModeOf(notify_path), 0600u);
  struct stat st {};
  ASSERT_EQ(::lstat(notify_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}

// The worker socket is the way past admission (slots, queue): under umask 000 it must still be
// 0600, owned by bulkheadd's user, so another local user's connect(2) is refused, whether the cell
// runs as bulkheadd's user or as that very user. The notify socket is 0600 too.
TEST(Privilege, WorkerSocketIsClosedToOtherUsersWhateverTheUmask) {
  SKIP_UNLESS_ROOT();
  ScopedUmask open_umask(0);
  Harness h(TestOptions(
      {CellSpec{.name = "plain", .extra_toml = "socket_mode = \"0666\"\n"},
       CellSpec{.name = "jail",
                .command = {TestWorkerPath(), "--notify-ready-after-ms", "0"},
                .extra_toml = "user = \"nobody\"\nready = \"notify\"\nsocket_mode = \"0666\"\n"}},
      "control_socket_mode = \"0666\"\n"));
  OpenToOthers(h);
  ASSERT_STARTED(h);
  for (const char* cell : {"plain", "jail"}) {
    SCOPED_TRACE(cell);
    const std::string worker_socket = h.WorkerSocket(cell);
    EXPECT_EQ(ModeOf(worker_socket), 0600u);
    struct stat st {};
    ASSERT_EQ(::lstat(worker_socket.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(ConnectAsNobody(worker_socket), EACCES) << worker_socket;
    EXPECT_EQ(ModeOf(h.runtime_dir() + "/" + cell + ".notify"), 0600u);
    // The way through admission stays open to the user, and the cell serves.
    ProcessResult call = CtlAsNobody(h, {"call", cell, "--data", "echo hi"});
    EXPECT_EQ(call.exit_code(), kExitOk) << call.Describe();
    EXPECT_EQ(call.out, "hi\n");
  }
  EXPECT_EQ(ConnectAsNobody(h.CellSocket("plain")), 0);
  EXPECT_EQ(ModeOf(h.control_socket()), 0666u);
  EXPECT_EQ(ModeOf(h.runtime_dir() + "/bulkheadd.pid"), 0644u);
  EXPECT_EQ(h.Cell("jail")["state"], "running");
}

TEST(Privilege, SocketModeAndGroupDecideWhoMayCall) {
  SKIP_UNLESS_ROOT();
  Harness h(TestOptions({CellSpec{.name = "open", .extra_toml = "socket_mode = \"0666\"\n"},
                         CellSpec{.name = "closed"},
                         CellSpec{.name = "grouped", .extra_toml = "socket_group = \"nogroup\"\n"}},
                        "control_socket_mode = \"0666\"\n"));
  OpenToOthers(h);
  ASSERT_STARTED(h);
  EXPECT_EQ(ModeOf(h.CellSocket("open")), 0666u);
  EXPECT_EQ(ModeOf(h.CellSocket("closed")), 0660u);
  EXPECT_EQ(GroupOf(h.CellSocket("closed")), ::getegid());
  EXPECT_EQ(ModeOf(h.CellSocket("grouped")), 0660u);
  EXPECT_EQ(GroupOf(h.CellSocket("grouped")), 65534u);

  ProcessResult open = CtlAsNobody(h, {"call", "open", "--data", "echo hi"});
  EXPECT_EQ(open.exit_code(), kExitOk) << open.Describe();
  EXPECT_EQ(open.out, "hi\n");

  ProcessResult closed = CtlAsNobody(h, {"call", "closed", "--data", "echo hi"});
  EXPECT_EQ(closed.exit_code(), kExitUnreachable) << closed.Describe();
  EXPECT_THAT(closed.err, HasSubstr("Permission denied"));

  ProcessResult grouped = CtlAsNobody(h, {"call", "grouped", "--data", "echo hi"});
  EXPECT_EQ(grouped.exit_code(), kExitOk) << grouped.Describe();

  // Root still reaches every cell.
  EXPECT_OK_REPLY(h.Call("closed", "echo root"), "root");
}

TEST(Privilege, NobodyReadsStatusButMayNotStop) {
  SKIP_UNLESS_ROOT();
  Harness h(TestOptions({CellSpec{.name = "payments"}}, "control_socket_mode = \"0666\"\n"));
  OpenToOthers(h);
  ASSERT_STARTED(h);
  EXPECT_EQ(ModeOf(h.control_socket()), 0666u);

  ProcessResult status = CtlAsNobody(h, {"status", "--json"});
  ASSERT_EQ(status.exit_code(), kExitOk) << status.Describe();
  EXPECT_THAT(status.out, HasSubstr("\"payments\""));

  for (const char* command : {"stop", "restart", "start"}) {
    ProcessResult refused = CtlAsNobody(h, {command, "payments"});
    EXPECT_EQ(refused.exit_code(), kExitPermissionDenied) << refused.Describe();
    EXPECT_EQ(refused.err, std::string("bulkheadctl: ") + command +
                               " payments: permission denied: uid 65534 may not " + command +
                               " cells\n");
  }
  EXPECT_EQ(h.Cell("payments")["state"], "running");
  EXPECT_EQ(h.Cell("payments")["starts"], 1);

  // The supervisor's own user may.
  Result<ProcessResult> stop = h.Ctl({"stop", "payments"});
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->exit_code(), kExitOk) << stop->Describe();
  EXPECT_TRUE(
      h.WaitForCell("payments", [](const nlohmann::json& c) { return c["state"] == "stopped"; }));
}

TEST(Privilege, ControlGroupMembersMayStop) {
  SKIP_UNLESS_ROOT();
  Harness h(TestOptions({CellSpec{.name = "payments"}},
                        "control_socket_mode = \"0660\"\ncontrol_socket_group = \"nogroup\"\n"
                        "control_group = \"nogroup\"\n"));
  OpenToOthers(h);
  ASSERT_STARTED(h);
  EXPECT_EQ(ModeOf(h.control_socket()), 0660u);
  EXPECT_EQ(GroupOf(h.control_socket()), 65534u);
  ProcessResult stop = CtlAsNobody(h, {"stop", "payments"});
  EXPECT_EQ(stop.exit_code(), kExitOk) << stop.Describe();
  EXPECT_TRUE(
      h.WaitForCell("payments", [](const nlohmann::json& c) { return c["state"] == "stopped"; }));
}

TEST(Privilege, DefaultControlSocketIsClosedToOthers) {
  SKIP_UNLESS_ROOT();
  Harness h(TestOptions({CellSpec{.name = "payments"}}));
  OpenToOthers(h);
  ASSERT_STARTED(h);
  EXPECT_EQ(ModeOf(h.control_socket()), 0660u);
  EXPECT_EQ(ModeOf(h.CellSocket("payments")), 0660u);
  ProcessResult status = CtlAsNobody(h, {"status"});
  EXPECT_EQ(status.exit_code(), kExitUnreachable) << status.Describe();
  EXPECT_THAT(status.err, HasSubstr("Permission denied"));
}

}  // namespace
}  // namespace bulkhead::e2e
