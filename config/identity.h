// SPDX-License-Identifier: MIT
// Users, groups and file modes of the config (docs/config.md, "Privileges"): `user`, `group`,
// `supplementary_groups`, `socket_group`, `control_socket_group`, `control_group` are resolved in
// the host's user database (getpwnam_r(3), getgrnam_r(3), so NSS modules apply) when the config is
// loaded; `umask`, `socket_mode` and `control_socket_mode` are octal strings. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead::config {

// A user resolved from a name or a numeric id.
struct ResolvedUser {
  uid_t uid = 0;
  // From the user database; false for a numeric id without an entry (then the fields below are
  // empty and gid is 0).
  bool has_entry = false;
  std::string name;   // pw_name
  gid_t gid = 0;      // pw_gid, the primary group
  std::string home;   // pw_dir
  std::string shell;  // pw_shell
};

// `text` is a user name, or a decimal uid (all digits, 0..4294967294, as systemd.exec(5) User=
// accepts; a number is used even without a database entry). Errors: "no user named \"x\" in the
// user database", "uid 4294967295 is not a valid user id", or the lookup's errno text.
Result<ResolvedUser> ResolveUser(std::string_view text);
// The same for a group name or decimal gid.
Result<gid_t> ResolveGroup(std::string_view text);

// An octal permission string as systemd writes them, "0660", "660", "0022": 1 to 4 octal digits,
// at most `max` (0777 for modes and umasks: no set-id or sticky bits). Errors name the text.
Result<uint32_t> ParseOctalMode(std::string_view text, uint32_t max);

// "0660": four octal digits, for messages and status output.
std::string FormatOctalMode(uint32_t mode);

}  // namespace bulkhead::config
