// SPDX-License-Identifier: MIT
// The privilege keys (docs/config.md, "Privileges"; systemd.exec(5) User=, Group=,
// SupplementaryGroups=, UMask=, NoNewPrivileges=) of [cells.NAME]: PrivilegesParser reads user
// and supplementary_groups, and completes group from user; group, umask, no_new_privileges,
// socket_mode and socket_group are read from their ValueSpec (config/config_keys.h). Users and
// groups are resolved in this host's database (config/identity.h). Internal to config/;
// thread-compatible.
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

class PrivilegesParser {
 public:
  explicit PrivilegesParser(ValueReader& reader) : reader_(reader) {}

  // Reads the key `id` (user or supplementary_groups) at `value` into `cell`; false after adding
  // its error.
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
