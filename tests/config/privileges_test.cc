// SPDX-License-Identifier: MIT
// The privilege keys of the config (docs/config.md, "Privileges"): user, group,
// supplementary_groups, umask, no_new_privileges, socket_mode, socket_group and the [supervisor]
// control_socket_mode, control_socket_group, control_group; their defaults, and every error with
// its file:line:col. Users and groups come from this host's database: root (0) and nobody /
// nogroup (65534), which every Debian system has.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/identity.h"

namespace bulkhead::config {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kFile[] = "/etc/bulkhead/bulkhead.toml";

std::vector<std::string> ErrorLines(const LoadResult& result) {
  std::vector<std::string> lines;
  for (const ConfigError& error : result.errors) lines.push_back(error.ToString());
  return lines;
}

// A config with one cell "a" whose table gets `cell_keys`, and `supervisor_keys` in [supervisor].
std::string WithKeys(const std::string& cell_keys, const std::string& supervisor_keys = "") {
  return "[supervisor]\n"
         "runtime_dir = \"/run/b\"\n" +
         supervisor_keys +
         "[cells.a]\n"
         "command = [\"/bin/true\"]\n"
         "max_concurrent = 1\n" +
         cell_keys;
}

Config MustParse(const std::string& text) {
  LoadResult result = ParseConfig(text, kFile);
  EXPECT_THAT(ErrorLines(result), IsEmpty());
  return result.config.value_or(Config{});
}

std::vector<std::string> Errors(const std::string& text) {
  LoadResult result = ParseConfig(text, kFile);
  EXPECT_FALSE(result.config.has_value());
  return ErrorLines(result);
}

// Line 6 is the first line after the cell's required keys (line 3 with supervisor_keys empty
// holds [cells.a]).
std::string At(int line, int column, const std::string& key, const std::string& message) {
  return std::string(kFile) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
         key + ": " + message;
}

TEST(PrivilegeConfig, Defaults) {
  Config config = MustParse(WithKeys(""));
  const CellConfig& cell = config.cells.at(0);
  EXPECT_FALSE(cell.user.has_value());
  EXPECT_FALSE(cell.group.has_value());
  EXPECT_FALSE(cell.has_supplementary_groups);
  EXPECT_EQ(cell.umask, 0022u);
  EXPECT_TRUE(cell.no_new_privileges);
  EXPECT_EQ(cell.socket_mode, 0660u);
  EXPECT_FALSE(cell.socket_group.has_value());
  EXPECT_EQ(config.supervisor.control_socket_mode, 0660u);
  EXPECT_FALSE(config.supervisor.control_socket_group.has_value());
  EXPECT_FALSE(config.supervisor.control_group.has_value());
}

TEST(PrivilegeConfig, UserByNameGivesItsPrimaryGroupAndEntry) {
  const CellConfig cell = MustParse(WithKeys("user = \"nobody\"\n")).cells.at(0);
  EXPECT_EQ(cell.user, 65534u);
  EXPECT_EQ(cell.group, 65534u);  // nobody's primary group, nogroup
  EXPECT_EQ(cell.user_name, "nobody");
  EXPECT_EQ(cell.user_home, "/nonexistent");
  EXPECT_EQ(cell.user_shell, "/usr/sbin/nologin");
  EXPECT_THAT(cell.supplementary_groups, IsEmpty());
}

TEST(PrivilegeConfig, NumericIdsAndExplicitGroups) {
  const CellConfig cell =
      MustParse(WithKeys("user = 65534\ngroup = \"0\"\nsupplementary_groups = [\"nogroup\", 4, "
                         "\"nogroup\"]\n"))
          .cells.at(0);
  EXPECT_EQ(cell.user, 65534u);
  EXPECT_EQ(cell.user_name, "nobody");
  EXPECT_EQ(cell.group, 0u);
  EXPECT_TRUE(cell.has_supplementary_groups);
  EXPECT_THAT(cell.supplementary_groups, ElementsAre(65534u, 4u));  // duplicates once

  // A uid without an entry is used as it is, given a group.
  const CellConfig bare = MustParse(WithKeys("user = \"4000000\"\ngroup = 4000000\n")).cells.at(0);
  EXPECT_EQ(bare.user, 4000000u);
  EXPECT_EQ(bare.group, 4000000u);
  EXPECT_EQ(bare.user_name, "");
}

TEST(PrivilegeConfig, ModesUmaskAndNoNewPrivileges) {
  Config config = MustParse(WithKeys(
      "umask = \"0077\"\nno_new_privileges = false\nsocket_mode = \"666\"\nsocket_group = "
      "\"nogroup\"\n",
      "control_socket_mode = \"0600\"\ncontrol_socket_group = 65534\ncontrol_group = \"root\"\n"));
  const CellConfig& cell = config.cells.at(0);
  EXPECT_EQ(cell.umask, 0077u);
  EXPECT_FALSE(cell.no_new_privileges);
  EXPECT_EQ(cell.socket_mode, 0666u);
  EXPECT_EQ(cell.socket_group, 65534u);
  EXPECT_EQ(config.supervisor.control_socket_mode, 0600u);
  EXPECT_EQ(config.supervisor.control_socket_group, 65534u);
  EXPECT_EQ(config.supervisor.control_group, 0u);
}

TEST(PrivilegeConfig, UnknownUsersAndGroupsArePositionedErrors) {
  EXPECT_THAT(
      Errors(WithKeys("user = \"bulkhead-no-such-user\"\ngroup = \"bulkhead-no-such-group\"\n"
                      "socket_group = \"\"\n")),
      ElementsAre(
          At(6, 8, "cells.a.user", "no user named \"bulkhead-no-such-user\" in the user database"),
          At(7, 9, "cells.a.group",
             "no group named \"bulkhead-no-such-group\" in the group database"),
          At(8, 16, "cells.a.socket_group", "must not be empty")));
  EXPECT_THAT(Errors(WithKeys("", "control_group = \"bulkhead-no-such-group\"\n")),
              ElementsAre(At(3, 17, "supervisor.control_group",
                             "no group named \"bulkhead-no-such-group\" in the group database")));
}

TEST(PrivilegeConfig, BadIdsAndTypes) {
  EXPECT_THAT(Errors(WithKeys("user = -1\ngroup = \"4294967295\"\nsupplementary_groups = \"adm\"\n"
                              "no_new_privileges = \"yes\"\n")),
              ElementsAre(At(6, 8, "cells.a.user", "must not be negative, got -1"),
                          At(7, 9, "cells.a.group",
                             "gid 4294967295 is not a valid group id (0..4294967294)"),
                          At(8, 24, "cells.a.supplementary_groups",
                             "expected array of groups, got string (write supplementary_groups = "
                             "[\"adm\", 4]; [] for none)"),
                          At(9, 21, "cells.a.no_new_privileges",
                             "expected boolean, got string (write true or false without quotes)")));
  EXPECT_THAT(Errors(WithKeys("supplementary_groups = [\"nogroup\", true]\n")),
              ElementsAre(At(6, 36, "cells.a.supplementary_groups[1]",
                             "expected string, got boolean (write a name, \"nobody\", or a "
                             "numeric id, 65534)")));
}

TEST(PrivilegeConfig, NumericUserWithoutEntryNeedsAGroup) {
  EXPECT_THAT(Errors(WithKeys("user = 4000000\n")),
              ElementsAre(At(6, 8, "cells.a.user",
                             "uid 4000000 has no entry in the user database, so it has no primary "
                             "group; set group")));
}

TEST(PrivilegeConfig, ModesAreOctalStrings) {
  const std::string expected =
      "expected 1 to 4 octal digits from 0 to 0777, such as \"0660\"; got ";
  EXPECT_THAT(Errors(WithKeys("socket_mode = \"0668\"\numask = \"1777\"\n")),
              ElementsAre(At(6, 15, "cells.a.socket_mode", expected + "\"0668\""),
                          At(7, 9, "cells.a.umask", expected + "\"1777\"")));
  EXPECT_THAT(Errors(WithKeys("socket_mode = 432\n")),
              ElementsAre(At(6, 15, "cells.a.socket_mode",
                             "expected string, got integer (write the mode as an octal string, "
                             "such as \"0660\")")));
  EXPECT_THAT(Errors(WithKeys("", "control_socket_mode = \"\"\n")),
              ElementsAre(At(3, 23, "supervisor.control_socket_mode", expected + "\"\"")));
}

TEST(OctalMode, ParseAndFormat) {
  EXPECT_EQ(ParseOctalMode("0", 0777).value(), 0u);
  EXPECT_EQ(ParseOctalMode("0755", 0777).value(), 0755u);
  EXPECT_EQ(ParseOctalMode("22", 0777).value(), 022u);
  EXPECT_FALSE(ParseOctalMode("00000", 0777).ok());
  EXPECT_FALSE(ParseOctalMode("-1", 0777).ok());
  EXPECT_FALSE(ParseOctalMode("0o660", 0777).ok());
  EXPECT_EQ(FormatOctalMode(0660), "0660");
  EXPECT_EQ(FormatOctalMode(0), "0000");
}

TEST(Identity, ResolveUserAndGroup) {
  Result<ResolvedUser> root = ResolveUser("root");
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_EQ(root->uid, 0u);
  EXPECT_TRUE(root->has_entry);
  Result<ResolvedUser> by_id = ResolveUser("65534");
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ(by_id->name, "nobody");
  EXPECT_FALSE(ResolveUser("").ok());
  EXPECT_EQ(ResolveGroup("nogroup").value(), 65534u);
  EXPECT_EQ(ResolveGroup("12").value(), 12u);
  EXPECT_FALSE(ResolveGroup("99999999999").ok());
}

}  // namespace
}  // namespace bulkhead::config
