// SPDX-License-Identifier: MIT
// The [supervisor] table (config/supervisor_table.h).
#include "config/supervisor_table.h"

#include <optional>
#include <string>

#include "base/check.h"
#include "base/status.h"
#include "config/config_keys.h"
#include "config/listen_address.h"

namespace bulkhead::config {
namespace {

// A cgroup as the kernel names it in /proc/PID/cgroup: "/" or "/a/b", relative to the cgroup2
// mount. Components are never ".", ".." or empty, and hold no character a cgroup file name
// cannot (whitespace, control characters); a trailing '/' is dropped.
std::optional<std::string> ExpectCgroupPath(ValueReader& reader, const toml::node& node,
                                            const std::string& path) {
  std::optional<std::string> text = reader.ExpectString(node, path);
  if (!text) return std::nullopt;
  std::string value = *text;
  while (value.size() > 1 && value.back() == '/') value.pop_back();
  auto fail = [&](const std::string& why) {
    reader.AddError(At(node.source()), path, why + ", got " + Quoted(*text));
    return std::nullopt;
  };
  if (value.empty() || value.front() != '/') {
    return fail(
        "must be a cgroup path under the cgroup2 mount starting with '/' "
        "(\"/pod.slice/bulkhead\")");
  }
  for (unsigned char c : value) {
    if (c <= ' ' || c == 0x7f) return fail("must not contain whitespace or control characters");
  }
  if (value != "/") {
    for (size_t start = 1; start <= value.size();) {
      size_t end = value.find('/', start);
      if (end == std::string::npos) end = value.size();
      std::string_view part = std::string_view(value).substr(start, end - start);
      if (part.empty() || part == "." || part == "..") {
        return fail("must not have empty, \".\" or \"..\" components");
      }
      start = end + 1;
    }
  }
  return value;
}

// `metrics_listen`: a TCP address or an absolute Unix socket path (config/listen_address.h).
void ParseMetricsListen(ValueReader& reader, SocketChecks& sockets, const toml::node& node,
                        const std::string& path, SupervisorConfig& out) {
  std::optional<std::string> text = reader.ExpectString(node, path);
  if (!text) return;
  Result<ListenAddress> address = ParseListenAddress(*text);
  if (!address.ok()) {
    reader.AddError(At(node.source()), path, address.status().message());
    return;
  }
  if (address->is_tcp()) {
    sockets.AddTcp({*address, path, At(node.source())});
  } else {
    sockets.Add({address->path, path, path, "socket", At(node.source()), ""});
  }
  out.metrics_listen = std::move(address).value();
}

}  // namespace

// `table` is null when [supervisor] is absent (or not a table): everything takes its default.
void ParseSupervisorTable(const toml::table* table, const std::string& default_runtime_dir,
                          ValueReader& reader, SocketChecks& sockets, SupervisorConfig& out) {
  out.runtime_dir = default_runtime_dir;
  SourcePosition runtime_dir_at;
  bool has_control_socket = false;
  if (table != nullptr) {
    for (auto [key, node] : InFileOrder(*table)) {
      const std::string path = JoinKey("supervisor", key->str());
      const std::string_view name = key->str();
      const SupervisorKey* known = FindSupervisorKey(name);
      if (known == nullptr) {
        reader.UnknownKey(*key, path, SupervisorKeyNames());
        continue;
      }
      if (known->value.kind != ValueKind::kOwn) {
        if (std::optional<KeyValue> value = reader.ExpectValue(known->value, *node, path)) {
          known->store(out, *value);
        }
        continue;
      }
      switch (known->id) {
        case SupervisorKeyId::kRuntimeDir: {
          runtime_dir_at = At(node->source());
          if (std::optional<std::string> dir = reader.ExpectPath(*node, path)) {
            out.runtime_dir = std::move(*dir);
          } else {
            sockets.RefuseRuntimeDir();
          }
          break;
        }
        case SupervisorKeyId::kControlSocket: {
          has_control_socket = true;
          if (std::optional<std::string> socket = reader.ExpectPath(*node, path)) {
            out.control_socket = std::move(*socket);
            sockets.Add({out.control_socket, path, path, "socket", At(node->source()), ""});
          }
          break;
        }
        case SupervisorKeyId::kCgroupParent: {
          if (std::optional<std::string> parent = ExpectCgroupPath(reader, *node, path)) {
            out.cgroup_parent = std::move(*parent);
          }
          break;
        }
        case SupervisorKeyId::kMetricsListen:
          ParseMetricsListen(reader, sockets, *node, path, out);
          break;
        case SupervisorKeyId::kAccessLog: {
          if (node->is_string() && node->value<std::string>() == "stderr") {
            out.access_log = "stderr";
          } else if (std::optional<std::string> file = reader.ExpectPath(*node, path)) {
            out.access_log = std::move(*file);
          }
          break;
        }
        default:
          // A key of kind kOwn (config/config_keys.h) needs its case above.
          BH_CHECK(false);
      }
    }
  }
  if (!has_control_socket) {
    out.control_socket = JoinPath(out.runtime_dir, "control.sock");
    // Reported at supervisor.runtime_dir when that is what made the path.
    sockets.AddDerived({out.control_socket, "supervisor.control_socket",
                        "supervisor.control_socket", "default socket", runtime_dir_at,
                        "supervisor.runtime_dir"});
  }
}

}  // namespace bulkhead::config
