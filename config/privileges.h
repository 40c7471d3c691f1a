// SPDX-License-Identifier: MIT
// The privilege keys (docs/config.md, "Privileges"; systemd.exec(5) User=, Group=,
// SupplementaryGroups=, UMask=, NoNewPrivileges=): PrivilegesParser reads those of [cells.NAME]
// (user, group, supplementary_groups, umask, no_new_privileges, socket_mode, socket_group), and
// ExpectGroup / ExpectMode serve [supervisor]'s control_socket_mode, control_socket_group and
// control_group too. Users and groups are resolved in this host's database (config/identity.h).
// Internal to config/; thread-compatible.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_keys.h"
#include "config/identity.h"
#include "config/value_reader.h"

namespace bulkhead::config {

// A group name or gid (an integer, or a string of digits), resolved.
std::optional<gid_t> ExpectGroup(ValueReader& reader, const toml::node& node,
                                 const std::string& path);
// An octal permission string, "0660" (config/identity.h), 0..0777.
std::optional<uint32_t> ExpectMode(ValueReader& reader, const toml::node& node,
                                   const std::string& path);

class PrivilegesParser {
 public:
  explicit PrivilegesParser(ValueReader& reader) : reader_(reader) {}

  // Reads the key `id` (one of the keys above) at `value` into `cell`; false after adding its
  // error.
  bool ParseKey(CellKeyId id, const toml::node& value, const std::string& key_path,
                CellConfig& cell);
  // Once the cell's table is read: `group` left out with `user` set becomes the user's primary
  // group, an error when the uid has no database entry. `path` is the cell's key path.
  bool Finish(const std::string& path, CellConfig& cell);

 private:
  ValueReader& reader_;
  // The primary group of `user` when it has a database entry, and where `user` was written.
  std::optional<gid_t> user_primary_group_;
  std::optional<SourcePosition> user_at_;
};

}  // namespace bulkhead::config
