// SPDX-License-Identifier: MIT
// Loading the config: the file is read, toml++ parses it, and the tables are walked once, each by
// the file of its section (config/supervisor_table.h, config/cell_table.h, with config/limits.h
// and config/privileges.h), checking every key, filling defaults and collecting every error they
// find; then the sockets and the cells' needs are checked across the whole file
// (config/socket_checks.h, config/cell_needs.h). toml++ may
// throw in config/; nothing is allowed out of here. Thread-compatible (reads environment and cwd).
#include "config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <string_view>

#include "base/lexical_path.h"
#include "base/runtime_dir.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "config/cell_needs.h"
#include "config/cell_table.h"
#include "config/config_keys.h"
#include "config/socket_checks.h"
#include "config/supervisor_table.h"
#include "config/syntax_hint.h"
#include "config/value_reader.h"

namespace bulkhead::config {
namespace {

// A config file is a few kilobytes; refuse to read anything absurd into memory.
constexpr size_t kMaxConfigFileBytes = 16 << 20;

constexpr std::array<std::string_view, 2> kTopLevelKeys = {"supervisor", "cells"};

// Walks the whole file: [supervisor] first (the cells' defaults depend on it), then each
// [cells.NAME] in file order.
// `end`: where the text ends (where "no cells" is said when there is no cells table at all).
void ParseRoot(const toml::table& root, const std::string& default_runtime_dir, ValueReader& reader,
               SocketChecks& sockets, Config& config, SourcePosition end) {
  config.source = reader.file();
  const toml::table* supervisor = nullptr;
  const toml::table* cells = nullptr;
  const toml::node* cells_node = nullptr;
  for (auto [key, node] : InFileOrder(root)) {
    const std::string path = KeySegment(key->str());
    if (key->str() == "supervisor") {
      supervisor = reader.ExpectTable(*node, path);
    } else if (key->str() == "cells") {
      cells_node = node;
      cells =
          reader.ExpectTable(*node, path, "write each cell as a [cells.NAME] table, not [[cells]]");
    } else if (FindSupervisorKey(key->str()) != nullptr) {
      reader.AddError(At(key->source()), path,
                      "unknown key; " + std::string(key->str()) + " belongs in [supervisor]");
    } else if (FindCellKey(key->str()) != nullptr) {
      reader.AddError(
          At(key->source()), path,
          "unknown key; " + std::string(key->str()) + " belongs in a [cells.NAME] table");
    } else {
      reader.UnknownKey(*key, path, kTopLevelKeys);
    }
  }

  ParseSupervisorTable(supervisor, default_runtime_dir, reader, sockets, config.supervisor);

  if (cells_node == nullptr) {
    reader.AddError(end, "cells", "no cells defined; add at least one [cells.NAME] table");
  } else if (cells != nullptr && cells->empty()) {
    reader.AddError(At(cells->source()), "cells",
                    "no cells defined; add at least one [cells.NAME] table");
  }
  if (cells == nullptr) return;
  for (auto [key, node] : InFileOrder(*cells)) {
    std::optional<CellConfig> cell =
        ParseCellTable(*key, *node, config.supervisor, reader, sockets);
    if (cell) config.cells.push_back(std::move(*cell));
  }
  // File order is the order of the [cells.NAME] tables themselves.
  std::stable_sort(
      config.cells.begin(), config.cells.end(),
      [](const CellConfig& a, const CellConfig& b) { return Before(a.position, b.position); });
}

// Records in config.positions where [supervisor] and each [cells.NAME] table start and where
// each of their keys' values was written.
void RecordPositions(const toml::table& root, Config& config) {
  auto record_table = [&config](const std::string& path, const toml::table& table) {
    config.positions[path] = At(table.source());
    for (auto [key, node] : InFileOrder(table)) {
      const std::string key_path = JoinKey(path, key->str());
      config.positions[key_path] = At(node->source());
      // And each element of an array ("cells.a.needs[1]"), for the checks across cells.
      if (const toml::array* array = node->as_array()) {
        for (size_t i = 0; i < array->size(); ++i) {
          config.positions[key_path + "[" + std::to_string(i) + "]"] = At(array->get(i)->source());
        }
      }
    }
  };
  if (const toml::table* supervisor = root["supervisor"].as_table()) {
    record_table("supervisor", *supervisor);
  }
  if (const toml::table* cells = root["cells"].as_table()) {
    for (auto [name, node] : InFileOrder(*cells)) {
      if (const toml::table* cell = node->as_table())
        record_table(JoinKey("cells", name->str()), *cell);
    }
  }
}

// The absolute directory of `source_path`, or "" when it is relative and the cwd is unknown.
std::string BaseDirectoryOf(const std::string& source_path) {
  const std::string dir = ParentDirectory(source_path);
  if (IsAbsolutePath(dir)) return NormalizePath(dir);
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr || !IsAbsolutePath(cwd)) return "";
  return ResolvePath(dir, cwd);
}

LoadResult SingleError(const std::string& file, std::string message) {
  LoadResult result;
  result.errors.push_back({file, 0, 0, "", std::move(message)});
  return result;
}

// toml++ parses; the tables are walked once, collecting every error; then the sockets are checked
// across the whole file.
// `look_at_files`: LoadConfigFile's checks of the files a started bulkheadd would fail on (the
// access_log file), reported with the file's other errors.
LoadResult Parse(std::string_view toml_text, const std::string& source_path,
                 const std::string& default_runtime_dir, const HostFacts& host,
                 bool look_at_files) {
  ValueReader reader(source_path, BaseDirectoryOf(source_path), host);
  toml::table root;
  try {
    root = toml::parse(toml_text, std::string_view(source_path));
  } catch (const toml::parse_error& e) {
    std::string message(e.description());
    // toml++ says "Error while parsing ..."; every other message here starts in lower case.
    if (!message.empty() && message.front() == 'E') message.front() = 'e';
    // "expected digit, saw 's'" alone does not say that `stall_timeout = 3s` needs quotes.
    if (std::string hint = SyntaxHint(toml_text, At(e.source())); !hint.empty()) {
      message += "; " + hint;
    }
    // toml++ names no key: the table header above the line, and the line's key, say where.
    reader.AddError(At(e.source()), SyntaxErrorKey(toml_text, At(e.source())), std::move(message));
    return reader.Finish(std::nullopt);
  }

  Config config;
  SocketChecks sockets;
  ParseRoot(root, default_runtime_dir, reader, sockets, config, EndOf(toml_text));
  RecordPositions(root, config);
  sockets.Check(reader);
  // Every [cells.NAME] table's needs, refused cells' too (their strings as written): a need that
  // is wrong is reported in the same round as the cell's other errors, not after they are fixed.
  std::vector<std::string> cell_names;
  std::vector<CellNeeds> needs;
  if (const toml::table* cells = root["cells"].as_table()) {
    for (auto [name, node] : InFileOrder(*cells)) {
      cell_names.emplace_back(name->str());
      CellNeeds& cell = needs.emplace_back(CellNeeds{std::string(name->str()), {}});
      auto parsed = std::find_if(config.cells.begin(), config.cells.end(),
                                 [&cell](const CellConfig& c) { return c.name == cell.name; });
      if (parsed != config.cells.end()) {
        cell.needs = parsed->needs;
      } else if (const toml::array* written =
                     node->is_table() ? (*node->as_table())["needs"].as_array() : nullptr) {
        // By index, as the errors name them; an element already refused (no string, no cell
        // name) is left empty, which CheckNeeds skips.
        for (const toml::node& element : *written) {
          std::optional<std::string> text = element.value<std::string>();
          cell.needs.push_back(text && IsValidCellName(*text) ? std::move(*text) : std::string());
        }
      }
    }
  }
  CheckNeeds(needs, config, cell_names, reader);
  // startup would fail on an access_log file it cannot open (after the config was accepted, with
  // no position): --check-config and reload say so first, at the key.
  const std::string& access_log = config.supervisor.access_log;
  if (look_at_files && !access_log.empty() && access_log != "stderr") {
    if (std::optional<std::string> problem = AccessLogFileProblem(access_log)) {
      reader.AddError(config.PositionOf("supervisor.access_log"), "supervisor.access_log",
                      std::move(*problem));
    } else if (struct stat st {}; ::stat(access_log.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
      // Whether it has a reader is not looked at: opening it and closing it again would end the
      // stream of a reader waiting in open(2) (fifo(7)), as `cat < F` does.
      reader.AddWarning(config.PositionOf("supervisor.access_log"), "supervisor.access_log",
                        access_log +
                            " is a named pipe: bulkheadd opens it only while its reader runs "
                            "(startup fails, a reload keeps the old file, without one); not "
                            "checked here");
    }
  }
  return reader.Finish(std::move(config));
}

}  // namespace

std::optional<std::string> AccessLogFileProblem(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return file + " is a directory";
    if (::access(file.c_str(), W_OK) != 0) {
      return "cannot open " + file + " for writing: " + std::strerror(errno);
    }
    return std::nullopt;
  }
  if (errno != ENOENT) return "cannot open " + file + ": " + std::strerror(errno);
  // Not there yet: bulkheadd creates it (mode 0640), in a directory that must exist.
  const std::string dir = ParentDirectory(file);
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return "cannot create " + file + ": directory " + dir + " does not exist";
    return "cannot create " + file + ": " + dir + ": " + std::strerror(errno);
  }
  if (!S_ISDIR(st.st_mode)) return "cannot create " + file + ": " + dir + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "cannot create " + file + " in " + dir + ": " + std::strerror(errno);
  }
  return std::nullopt;
}

SourcePosition Config::PositionOf(std::string_view key) const {
  auto it = positions.find(key);
  return it == positions.end() ? SourcePosition{} : it->second;
}

HostFacts CurrentHostFacts() {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return {cpus >= 1 ? static_cast<uint32_t>(std::min<long>(cpus, UINT32_MAX)) : 1u};
}

LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path) {
  return ParseConfig(toml_text, source_path, CurrentHostFacts());
}

LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path,
                       const HostFacts& host) {
  try {
    return Parse(toml_text, source_path, DefaultRuntimeDirFromEnvironment(), host,
                 /*look_at_files=*/false);
  } catch (const std::exception& e) {
    return SingleError(source_path,
                       std::string("internal error while loading config: ") + e.what());
  } catch (...) {
    return SingleError(source_path, "internal error while loading config");
  }
}

LoadResult LoadConfigFile(const std::string& path) {
  try {
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return SingleError(path, Status::FromErrno("cannot open config file").message());
    std::string text;
    char buffer[64 * 1024];
    for (;;) {
      const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        return SingleError(path, Status::FromErrno("cannot read config file").message());
      }
      if (n == 0) break;
      text.append(buffer, static_cast<size_t>(n));
      if (text.size() > kMaxConfigFileBytes) {
        return SingleError(path, "config file is larger than " +
                                     std::to_string(kMaxConfigFileBytes >> 20) + " MiB");
      }
    }
    return Parse(text, path, DefaultRuntimeDirFromEnvironment(), CurrentHostFacts(),
                 /*look_at_files=*/true);
  } catch (const std::exception& e) {
    return SingleError(path, std::string("internal error while loading config: ") + e.what());
  } catch (...) {
    return SingleError(path, "internal error while loading config");
  }
}

}  // namespace bulkhead::config
