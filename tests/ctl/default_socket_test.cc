// SPDX-License-Identifier: MIT
// DefaultControlSocket follows the config's rule (DefaultRuntimeDir + "/control.sock")
// for every case that rule distinguishes; ControlSocketFromEnvironment's precedence.
#include "ctl/default_socket.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/runtime_dir.h"

namespace bulkhead::ctl {
namespace {

TEST(DefaultControlSocket, FollowsTheDocumentedOrder) {
  EXPECT_EQ(DefaultControlSocket(1000, "/run/unit", "/run/user/1000"), "/run/unit/control.sock");
  EXPECT_EQ(DefaultControlSocket(0, "", "/run/user/0"), "/run/bulkhead/control.sock");
  EXPECT_EQ(DefaultControlSocket(1000, "", "/run/user/1000"),
            "/run/user/1000/bulkhead/control.sock");
  EXPECT_EQ(DefaultControlSocket(1000, "", ""), "/tmp/bulkhead-1000/control.sock");
}

// The same answer as bulkheadd's config loader gives, whatever the environment.
TEST(DefaultControlSocket, AgreesWithTheConfigLoader) {
  const std::vector<std::string> runtime_directories = {
      "", "/run/unit", "/run/a:/run/b", "relative", "/run//x/./y/../z/", "/", "/..", ":/run/b"};
  const std::vector<std::string> xdg_dirs = {"",  "/run/user/1000", "/run/user/1000/", "run/user",
                                             "/", "/a/../b"};
  for (uid_t uid : {0u, 1000u}) {
    for (const std::string& runtime_directory : runtime_directories) {
      for (const std::string& xdg : xdg_dirs) {
        std::string dir = DefaultRuntimeDir(uid, runtime_directory, xdg);
        std::string expected = dir == "/" ? "/control.sock" : dir + "/control.sock";
        EXPECT_EQ(DefaultControlSocket(uid, runtime_directory, xdg), expected)
            << "uid " << uid << ", RUNTIME_DIRECTORY=\"" << runtime_directory
            << "\", XDG_RUNTIME_DIR=\"" << xdg << "\"";
      }
    }
  }
}

// Sets an environment variable (or unsets it, for nullopt) for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ControlSocketFromEnvironment, FlagThenEnvironmentThenDefault) {
  ScopedEnv runtime("RUNTIME_DIRECTORY", "/run/from-systemd");
  {
    ScopedEnv socket("BULKHEAD_SOCKET", "/tmp/env.sock");
    EXPECT_EQ(ControlSocketFromEnvironment("/tmp/flag.sock"), "/tmp/flag.sock");
    EXPECT_EQ(ControlSocketFromEnvironment(""), "/tmp/env.sock");
  }
  {
    ScopedEnv socket("BULKHEAD_SOCKET", "");
    EXPECT_EQ(ControlSocketFromEnvironment(""), "/run/from-systemd/control.sock");
  }
  {
    ScopedEnv socket("BULKHEAD_SOCKET", std::nullopt);
    EXPECT_EQ(ControlSocketFromEnvironment(""), "/run/from-systemd/control.sock");
    EXPECT_EQ(DefaultControlSocketFromEnvironment(),
              DefaultRuntimeDirFromEnvironment() + "/control.sock");
  }
}

}  // namespace
}  // namespace bulkhead::ctl
