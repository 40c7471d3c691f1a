// SPDX-License-Identifier: MIT
// The key tables of config/config_keys.h against the parser and the config structs: every key of
// each table is parsed with an example value, and its entry must name fields the parser changed,
// and together the entries must cover every field the parser wrote. A key added to CellConfig and
// the parser but left out of the table (or given the wrong fields) fails here.
#include "config/config_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <span>
#include <string>

#include "config/config.h"

namespace bulkhead::config {
namespace {

using ::testing::IsEmpty;

constexpr char kFile[] = "/etc/bulkhead/bulkhead.toml";

// A value for each key that differs from what the base config below gives it, as TOML.
const std::map<std::string, std::string, std::less<>> kCellExamples = {
    {"command", R"(["/bin/false"])"},
    {"protocol", R"("http")"},
    {"max_concurrent", "2"},
    {"concurrency", R"("adaptive")"},
    {"min_concurrent", "2"},
    {"latency_tolerance", R"("20%")"},
    {"max_queue", "3"},
    {"queue_timeout", R"("2s")"},
    {"max_connections", "10"},
    {"max_unsent_bytes", R"("128M")"},
    {"client_write_timeout", R"("5s")"},
    {"header_timeout", R"("3s")"},
    {"idle_timeout", R"("45s")"},
    {"restart", R"("never")"},
    {"restart_delay", R"("1s")"},
    {"restart_max_delay", R"("60s")"},
    {"restart_reset_after", R"("20s")"},
    {"start_limit_burst", "7"},
    {"start_limit_interval", R"("120s")"},
    {"start_limit_action", R"("fail")"},
    {"request_timeout", R"("3s")"},
    {"stall_timeout", R"("4s")"},
    {"ready", R"("notify")"},  // "http:/PATH" needs protocol = "http" as well
    {"worker_connections", R"("multiplex")"},
    {"start_timeout", R"("10s")"},
    {"needs", R"(["b"])"},
    {"watchdog", R"("5s")"},
    {"stop_signal", R"("SIGINT")"},
    {"kill_mode", R"("mixed")"},
    {"stop_timeout", R"("9s")"},
    {"restart_overlap", "false"},
    {"socket", R"("/run/bh/elsewhere.sock")"},
    {"listen", R"(["127.0.0.1:8081"])"},
    {"environment", R"({ MODE = "x" })"},
    {"working_directory", R"("/tmp")"},
    {"cpu_max", R"("50%")"},
    {"cpu_max_period", R"("50ms")"},
    {"cpu_weight", "50"},
    {"memory_max", R"("256M")"},
    {"memory_high", R"("128M")"},
    {"memory_swap_max", "0"},
    {"pids_max", "64"},
    {"oom_policy", R"("continue")"},
    {"oom_score_adjust", "100"},
    {"output", R"("null")"},
    {"log_line_max", "1024"},
    {"log_rate_limit_burst", "5"},
    {"log_rate_limit_interval", R"("1s")"},
    {"user", "0"},
    {"group", "0"},
    {"supplementary_groups", "[0]"},
    {"umask", R"("0077")"},
    {"no_new_privileges", "false"},
    {"socket_mode", R"("0600")"},
    {"socket_group", "0"},
};

const std::map<std::string, std::string, std::less<>> kSupervisorExamples = {
    {"runtime_dir", R"("/run/elsewhere")"},
    {"control_socket", R"("/run/bh/ctl.sock")"},
    {"max_payload_bytes", "1024"},
    {"log_level", R"("debug")"},
    {"cgroup", R"("off")"},
    {"cgroup_parent", R"("/pod.slice/bulkhead")"},
    {"metrics_listen", R"("127.0.0.1:0")"},
    {"access_log", R"("/var/log/bulkhead/access.log")"},
    {"on_shutdown", R"("poweroff")"},
    {"control_socket_mode", R"("0600")"},
    {"control_socket_group", "0"},
    {"control_group", "0"},
};

// Keys a frames cell (the base) refuses: their examples are written in a cell with protocol =
// "http" (the protocol entry of the table restores what that line wrote).
const std::set<std::string, std::less<>> kHttpOnlyCellKeys = {"header_timeout"};
// Keys a fixed cell (the base) refuses: their examples are written in an adaptive cell with a
// ceiling of 4.
const std::set<std::string, std::less<>> kAdaptiveOnlyCellKeys = {"min_concurrent",
                                                                  "latency_tolerance"};

// One cell "a" with its required keys; `supervisor` and `cell` are key = value lines that replace
// the base's line of the same key or are added.
std::string ConfigText(std::map<std::string, std::string, std::less<>> supervisor,
                       std::map<std::string, std::string, std::less<>> cell) {
  supervisor.try_emplace("runtime_dir", R"("/run/bh")");
  cell.try_emplace("command", R"(["/bin/true"])");
  cell.try_emplace("max_concurrent", "1");
  std::string text = "[supervisor]\n";
  for (const auto& [key, value] : supervisor) text += key + " = " + value + "\n";
  text += "[cells.a]\n";
  for (const auto& [key, value] : cell) text += key + " = " + value + "\n";
  return text;
}

Config MustParse(const std::string& text) {
  LoadResult result = ParseConfig(text, kFile, HostFacts{.cpus = 4});
  std::vector<std::string> errors;
  for (const ConfigError& error : result.errors) errors.push_back(error.ToString());
  EXPECT_THAT(errors, IsEmpty()) << text;
  return result.config.value_or(Config{});
}

using Examples = std::map<std::string, std::string, std::less<>>;

// For each key of `table` (CellKeys() or SupervisorKeys()): parses the base config with the key
// set to its example (`text_with(key, value)`), and checks the key's entry against the part of the
// Config that `part` picks (the cell or [supervisor]).
template <typename Key, typename Part>
void CheckTable(std::span<const Key> table, const Examples& examples,
                std::string (*text_with)(const std::string& key, const std::string& value),
                const Part& (*part)(const Config& config), const Key* (*find)(std::string_view)) {
  const Config base = MustParse(text_with("", ""));
  std::set<std::string_view> seen;
  for (const Key& key : table) {
    SCOPED_TRACE(key.name);
    EXPECT_TRUE(seen.insert(key.name).second) << "listed twice";
    EXPECT_EQ(find(key.name), &key);
    auto example = examples.find(key.name);
    if (example == examples.end()) {
      ADD_FAILURE() << "add an example value for the new key to the test's examples";
      continue;
    }
    const Config changed = MustParse(text_with(example->first, example->second));
    EXPECT_TRUE(key.differs(part(base), part(changed)))
        << "the parser changed none of the fields this entry names";
    // Every field the parser wrote for this key belongs to some entry of the table.
    Part restored = part(changed);
    for (const Key& other : table) other.copy(restored, part(base));
    EXPECT_TRUE(restored == part(base))
        << "the parser wrote a field that no entry of the table names";
  }
  EXPECT_EQ(seen.size(), examples.size()) << "the examples name a key the table lacks";
}

TEST(ConfigKeys, EveryCellKeyFillsTheFieldsItsEntryNames) {
  CheckTable<CellKey, CellConfig>(
      CellKeys(), kCellExamples,
      [](const std::string& key, const std::string& value) {
        if (key.empty()) return ConfigText({}, {});
        // The cell a needs is a second cell, after a.
        if (key == "needs") {
          return ConfigText({}, {{key, value}}) +
                 "[cells.b]\ncommand = [\"/bin/true\"]\nmax_concurrent = 1\n";
        }
        if (kAdaptiveOnlyCellKeys.contains(key)) {
          return ConfigText(
              {}, {{key, value}, {"concurrency", R"("adaptive")"}, {"max_concurrent", "4"}});
        }
        if (!kHttpOnlyCellKeys.contains(key)) return ConfigText({}, {{key, value}});
        return ConfigText({}, {{key, value}, {"protocol", R"("http")"}});
      },
      [](const Config& config) -> const CellConfig& {
        static const CellConfig kNone;
        return !config.cells.empty() && config.cells[0].name == "a" ? config.cells[0] : kNone;
      },
      &FindCellKey);
  EXPECT_EQ(CellKeyNames().size(), CellKeys().size());
}

TEST(ConfigKeys, EverySupervisorKeyFillsTheFieldsItsEntryNames) {
  CheckTable<SupervisorKey, SupervisorConfig>(
      SupervisorKeys(), kSupervisorExamples,
      [](const std::string& key, const std::string& value) {
        return key.empty() ? ConfigText({}, {}) : ConfigText({{key, value}}, {});
      },
      [](const Config& config) -> const SupervisorConfig& { return config.supervisor; },
      &FindSupervisorKey);
  EXPECT_EQ(SupervisorKeyNames().size(), SupervisorKeys().size());
}

// Every name the parser refuses as unknown is absent from the tables, and every name in them is
// accepted (above); a name in neither gets the unknown-key error.
TEST(ConfigKeys, NamesOutsideTheTablesAreUnknown) {
  EXPECT_EQ(FindCellKey("worker_socket"), nullptr);
  EXPECT_EQ(FindCellKey("log_level"), nullptr);
  EXPECT_EQ(FindSupervisorKey("max_queue"), nullptr);
  LoadResult result = ParseConfig(ConfigText({}, {{"max_queu", "1"}}), kFile);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(
      result.errors[0].ToString(),
      std::string(kFile) + ":6:1: cells.a.max_queu: unknown key; did you mean \"max_queue\"?");
}

}  // namespace
}  // namespace bulkhead::config
