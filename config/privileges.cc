// SPDX-License-Identifier: MIT
// The privilege keys (config/privileges.h).
#include "config/privileges.h"

#include <algorithm>

#include "base/check.h"
#include "base/status.h"

namespace bulkhead::config {
namespace {

// A user or group: a name (string) or a numeric id (integer, or a string of digits).
std::optional<std::string> ExpectIdentity(ValueReader& reader, const toml::node& node,
                                          const std::string& path) {
  if (const toml::value<int64_t>* integer = node.as_integer()) {
    if (integer->get() < 0) {
      reader.AddError(At(node.source()), path,
                      "must not be negative, got " + std::to_string(integer->get()));
      return std::nullopt;
    }
    return std::to_string(integer->get());
  }
  return reader.ExpectString(node, path, "write a name, \"nobody\", or a numeric id, 65534");
}

std::optional<ResolvedUser> ExpectUser(ValueReader& reader, const toml::node& node,
                                       const std::string& path) {
  std::optional<std::string> text = ExpectIdentity(reader, node, path);
  if (!text) return std::nullopt;
  Result<ResolvedUser> user = ResolveUser(*text);
  if (!user.ok()) {
    reader.AddError(At(node.source()), path, user.status().message());
    return std::nullopt;
  }
  return user.value();
}

}  // namespace

std::optional<gid_t> ExpectGroup(ValueReader& reader, const toml::node& node,
                                 const std::string& path) {
  std::optional<std::string> text = ExpectIdentity(reader, node, path);
  if (!text) return std::nullopt;
  Result<gid_t> group = ResolveGroup(*text);
  if (!group.ok()) {
    reader.AddError(At(node.source()), path, group.status().message());
    return std::nullopt;
  }
  return group.value();
}

// An octal permission string, "0660" (config/identity.h), 0..0777.
std::optional<uint32_t> ExpectMode(ValueReader& reader, const toml::node& node,
                                   const std::string& path) {
  std::optional<std::string> text =
      reader.ExpectString(node, path, "write the mode as an octal string, such as \"0660\"");
  if (!text) return std::nullopt;
  Result<uint32_t> mode = ParseOctalMode(*text, 0777);
  if (!mode.ok()) {
    reader.AddError(At(node.source()), path, mode.status().message());
    return std::nullopt;
  }
  return mode.value();
}

namespace {

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
        ExpectGroup(reader, *array->get(i), path + "[" + std::to_string(i) + "]");
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
    case CellKeyId::kGroup: {
      cell.group = ExpectGroup(reader_, value, key_path);
      key_ok = cell.group.has_value();
      break;
    }
    case CellKeyId::kSupplementaryGroups: {
      key_ok = ParseGroupList(reader_, value, key_path, cell.supplementary_groups);
      cell.has_supplementary_groups = true;
      break;
    }
    case CellKeyId::kUmask: {
      auto mask = ExpectMode(reader_, value, key_path);
      key_ok = mask.has_value();
      if (mask) cell.umask = *mask;
      break;
    }
    case CellKeyId::kNoNewPrivileges: {
      auto enabled = reader_.ExpectBoolean(value, key_path);
      key_ok = enabled.has_value();
      if (enabled) cell.no_new_privileges = *enabled;
      break;
    }
    case CellKeyId::kSocketMode: {
      auto mode = ExpectMode(reader_, value, key_path);
      key_ok = mode.has_value();
      if (mode) cell.socket_mode = *mode;
      break;
    }
    case CellKeyId::kSocketGroup: {
      cell.socket_group = ExpectGroup(reader_, value, key_path);
      key_ok = cell.socket_group.has_value();
      break;
    }
    default:
      BH_CHECK(false);  // cell_table.cc hands over only the privilege keys
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
