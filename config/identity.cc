// SPDX-License-Identifier: MIT
#include "config/identity.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <vector>

namespace bulkhead::config {
namespace {

// (uid_t)-1 and (gid_t)-1 mean "unchanged" to setresuid(2)/chown(2): never an id.
constexpr uint64_t kMaxId = 4'294'967'294;

bool AllDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Parses a decimal id; false when out of range.
bool ParseId(std::string_view text, uint64_t* id) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *id);
  return ec == std::errc() && ptr == text.data() + text.size() && *id <= kMaxId;
}

size_t LookupBufferSize(int name) {
  long size = ::sysconf(name);
  return size > 0 ? static_cast<size_t>(size) : 16384;
}

// Calls `lookup(buffer, size, &found)` (a getpw*_r / getgr*_r call) with a growing buffer.
// Returns 0 or the errno of the lookup; *found is null when there is no entry.
template <typename Lookup>
int WithBuffer(int size_name, std::vector<char>& buffer, Lookup lookup) {
  buffer.resize(LookupBufferSize(size_name));
  for (;;) {
    int rc = lookup(buffer.data(), buffer.size());
    if (rc != ERANGE || buffer.size() >= (size_t{1} << 24)) return rc;
    buffer.resize(buffer.size() * 2);
  }
}

std::string Quote(std::string_view text) { return "\"" + std::string(text) + "\""; }

}  // namespace

Result<ResolvedUser> ResolveUser(std::string_view text) {
  const bool numeric = AllDigits(text);
  uint64_t id = 0;
  if (numeric && !ParseId(text, &id)) {
    return Status::Error("uid " + std::string(text) + " is not a valid user id (0.." +
                         std::to_string(kMaxId) + ")");
  }
  if (text.empty()) return Status::Error("must not be empty");
  const std::string key(text);
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer;
  int rc = WithBuffer(_SC_GETPW_R_SIZE_MAX, buffer, [&](char* data, size_t size) {
    return numeric ? ::getpwuid_r(static_cast<uid_t>(id), &entry, data, size, &found)
                   : ::getpwnam_r(key.c_str(), &entry, data, size, &found);
  });
  if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) {
    return Status::FromErrno("looking up user " + Quote(text), rc);
  }
  ResolvedUser user;
  if (found == nullptr) {
    if (!numeric) return Status::Error("no user named " + Quote(text) + " in the user database");
    user.uid = static_cast<uid_t>(id);
    return user;
  }
  user.uid = found->pw_uid;
  user.has_entry = true;
  user.name = found->pw_name;
  user.gid = found->pw_gid;
  user.home = found->pw_dir != nullptr ? found->pw_dir : "";
  user.shell = found->pw_shell != nullptr ? found->pw_shell : "";
  return user;
}

Result<gid_t> ResolveGroup(std::string_view text) {
  if (text.empty()) return Status::Error("must not be empty");
  if (AllDigits(text)) {
    uint64_t id = 0;
    if (!ParseId(text, &id)) {
      return Status::Error("gid " + std::string(text) + " is not a valid group id (0.." +
                           std::to_string(kMaxId) + ")");
    }
    return static_cast<gid_t>(id);
  }
  const std::string key(text);
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer;
  int rc = WithBuffer(_SC_GETGR_R_SIZE_MAX, buffer, [&](char* data, size_t size) {
    return ::getgrnam_r(key.c_str(), &entry, data, size, &found);
  });
  if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) {
    return Status::FromErrno("looking up group " + Quote(text), rc);
  }
  if (found == nullptr) {
    return Status::Error("no group named " + Quote(text) + " in the group database");
  }
  return found->gr_gid;
}

Result<uint32_t> ParseOctalMode(std::string_view text, uint32_t max) {
  const std::string expected = "expected 1 to 4 octal digits from 0 to " + FormatOctalMode(max) +
                               ", such as \"0660\"; got " + Quote(text);
  if (text.empty() || text.size() > 4) return Status::Error(expected);
  uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return Status::Error(expected);
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (mode > max) return Status::Error(expected);
  return mode;
}

std::string FormatOctalMode(uint32_t mode) {
  std::string text(4, '0');
  for (int i = 3; i >= 0; --i) {
    text[static_cast<size_t>(i)] = static_cast<char>('0' + (mode & 7));
    mode >>= 3;
  }
  return text;
}

}  // namespace bulkhead::config
