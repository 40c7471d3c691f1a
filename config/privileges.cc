// SPDX-License-Identifier: MIT
// The privilege keys (config/privileges.h).
#include "config/privileges.h"

#include <algorithm>

#include "base/check.h"
#include "base/status.h"

namespace bulkhead::config {
namespace {

std::optional<ResolvedUser> ExpectUser(ValueReader& reader, const toml::node& node,
                                       const std::string& path) {
  std::optional<std::string> text = reader.ExpectIdentity(node, path);
  if (!text) return std::nullopt;
  Result<ResolvedUser> user = ResolveUser(*text);
  if (!user.ok()) {
    reader.AddError(At(node.source()), path, user.status().message());
    return std::nullopt;
  }
  return user.value();
}

// `supplementary_groups`: an array of group names or ids; may be empty.
bool ParseGroupList(ValueReader& reader, const toml::node& node, const std::string& path,
                    std::vector<gid_t>& groups) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    reader.TypeError(node, path, "array of groups",
                     "write supplementary_groups = [\"adm\", 4]; [] for none");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < array->size(); ++i) {
    std::optional<gid_t> group =
        reader.ExpectGroup(*array->get(i), path + "[" + std::to_string(i) + "]");
    if (!group) {
      ok = false;
      continue;
    }
    if (std::find(groups.begin(), groups.end(), *group) == groups.end()) groups.push_back(*group);
  }
  return ok;
}

}  // namespace

bool PrivilegesParser::ParseKey(CellKeyId id, const toml::node& value, const std::string& key_path,
                                CellConfig& cell) {
  bool key_ok = false;
  switch (id) {
    case CellKeyId::kUser: {
      auto user = ExpectUser(reader_, value, key_path);
      key_ok = user.has_value();
      if (user) {
        cell.user = user->uid;
        cell.user_name = user->name;
        cell.user_home = user->home;
        cell.user_shell = user->shell;
        if (user->has_entry) user_primary_group_ = user->gid;
        user_at_ = At(value.source());
      }
      break;
    }
    case CellKeyId::kSupplementaryGroups: {
      key_ok = ParseGroupList(reader_, value, key_path, cell.supplementary_groups);
      cell.has_supplementary_groups = true;
      break;
    }
    default:
      BH_CHECK(false);  // cell_table.cc hands over only user and supplementary_groups
  }
  return key_ok;
}

bool PrivilegesParser::Finish(const std::string& path, CellConfig& cell) {
  bool ok = true;
  // systemd.exec(5): the group defaults to the user's primary group. A numeric uid without an
  // entry has none to offer.
  if (user_at_ && !cell.group) {
    if (user_primary_group_) {
      cell.group = user_primary_group_;
    } else {
      reader_.AddError(
          *user_at_, JoinKey(path, "user"),
          "uid " + std::to_string(*cell.user) +
              " has no entry in the user database, so it has no primary group; set group");
      ok = false;
    }
  }
  return ok;
}

}  // namespace bulkhead::config
