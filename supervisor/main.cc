// SPDX-License-Identifier: MIT
// bulkheadd: load the config, build the supervisor, run it. As PID 1, first mount what is missing
// and last power off or reboot when configured (supervisor/init_mode.h, docs/pid1.md).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "base/exit_status.h"
#include "base/log.h"
#include "base/version.h"
#include "config/config.h"
#include "supervisor/container.h"
#include "supervisor/init_mode.h"
#include "supervisor/reexec.h"
#include "supervisor/reexec_state.h"
#include "supervisor/supervisor.h"
#ifdef BULKHEAD_TEST_REEXEC_FAULTS
#include "tests/e2e/reexec_faults.h"
#endif

int main(int argc, char** argv) {
  using namespace bulkhead;
  // Before anything may print: as PID 1, stdio may still be closed and /proc absent.
  const bool pid1 = ::getpid() == 1;
  // The container runtime, as PID 1 ("" on a machine, and when not PID 1).
  std::string container;
  if (pid1) {
    container = supervisor::DetectContainer(supervisor::ReadContainerSigns());
    for (const supervisor::InitLogLine& line : supervisor::SetUpInit(container)) {
      Log(line.level, {}, 0, line.message);
    }
  }
  CLI::App app{"bulkheadd: runs each cell's worker in its own compartment and admits requests"};
  std::string config_path = "/etc/bulkhead/bulkhead.toml";
  bool check_only = false;
  bool reexec_state_versions = false;
  int reexec_state_fd = -1;
  int reexec_fallback_exe_fd = -1;
  std::string reexec_fell_back;
  std::string log_level;
  app.add_option("-c,--config", config_path, "configuration file (TOML)");
  app.add_flag("--check-config", check_only, "validate the configuration and exit");
  app.add_flag("--reexec-state-versions", reexec_state_versions,
               "print the re-exec state versions this binary reads (docs/reexec.md) and exit");
  app.add_option(
         "--reexec-state", reexec_state_fd,
         "set by bulkheadd when it re-executes itself: the fd of its state (docs/reexec.md)")
      ->group("");
  app.add_option(std::string(supervisor::kFallbackExeFlag), reexec_fallback_exe_fd,
                 "set by bulkheadd when it re-executes itself: its own binary, run again when the "
                 "new one cannot read the state (docs/reexec.md, failure 5)")
      ->group("");
  app.add_option(std::string(supervisor::kFellBackFlag), reexec_fell_back,
                 "set by a new bulkheadd that could not read the state when it runs the previous "
                 "binary again: why (docs/reexec.md, failure 5)")
      ->group("");
  app.add_option("--log-level", log_level,
                 "lines below this level are dropped; overrides [supervisor] log_level")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  app.set_version_flag("--version", VersionLine("bulkheadd"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  // Asked by a running bulkheadd of its new binary before it re-executes into it: no config read.
  if (reexec_state_versions) {
    std::printf("%s\n", supervisor::ReadableVersionsLine().c_str());
    return kExitOk;
  }

  config::LoadResult loaded = config::LoadConfigFile(config_path);
  if (!loaded.config) {
    // The warnings too (of the cells without errors), first, as `bulkheadctl reload` shows a
    // refusal: fixing the errors should not reveal a second round of news.
    for (const config::ConfigError& warning : loaded.warnings) {
      WriteStderrLine(LogLevel::kWarning, "warning: " + warning.ToString());
    }
    // Plain file:line:col lines for a person; at priority err when stderr is the journal, so that
    // `journalctl -u bulkheadd -p err` shows why a start failed.
    for (const config::ConfigError& error : loaded.errors) {
      WriteStderrLine(LogLevel::kError, error.ToString());
    }
    // --check-config starts nothing whatever the outcome (it also runs beside a live bulkheadd).
    WriteStderrLine(
        LogLevel::kError,
        "bulkheadd: " + std::to_string(loaded.errors.size()) + " error(s)" +
            (loaded.warnings.empty()
                 ? ""
                 : " and " + std::to_string(loaded.warnings.size()) + " warning(s)") +
            " in " + config_path +
            (check_only ? "; configuration refused" : "; configuration refused, nothing started"));
    return kExitConfigInvalid;
  }
  // Warnings never refuse the file (docs/config.md, "Warnings"): --check-config exits 0 with them.
  if (check_only) {
    for (const config::ConfigError& warning : loaded.warnings) {
      std::fprintf(stderr, "warning: %s\n", warning.ToString().c_str());
    }
    const size_t cells = loaded.config->cells.size();
    std::printf("%s: ok (%zu %s", config_path.c_str(), cells, cells == 1 ? "cell" : "cells");
    if (!loaded.warnings.empty()) {
      std::printf(", %zu %s", loaded.warnings.size(),
                  loaded.warnings.size() == 1 ? "warning" : "warnings");
    }
    std::printf(")\n");
    return kExitOk;
  }
  // The command line wins over the file (docs/logging.md).
  if (!log_level.empty()) loaded.config->supervisor.log_level = log_level;
  SetLogLevel(ParseLogLevel(loaded.config->supervisor.log_level).value_or(LogLevel::kInfo));
  for (const config::ConfigError& warning : loaded.warnings) LogWarning(warning.ToString());
  // A client that hangs up must never kill the supervisor.
  ::signal(SIGPIPE, SIG_IGN);
  if (!pid1) {
    // PID 1 adopts every orphan anyway; elsewhere the cells' double-forked descendants would
    // escape to it (or to another subreaper) and never be reaped by us.
    Status subreaper = supervisor::BecomeChildSubreaper();
    if (!subreaper.ok()) LogWarning(subreaper.message() + ": orphans of cells are not reaped here");
  }

  // Started by a re-exec of bulkheadd (docs/reexec.md): its state first. The previous image
  // checked that this binary reads its version, so a failure here is a bug (failure 5 of
  // docs/reexec.md): the previous binary, open as reexec_fallback_exe_fd, runs again with the same
  // state and keeps the workers; without one (this image is that fallback) it exits, and the
  // workers, which die with their parent, are lost.
  std::optional<supervisor::ReexecState> reexec_state;
  supervisor::ReexecFallback reexec_fallback;
  if (reexec_state_fd >= 0) {
    reexec_fallback.state.Reset(reexec_state_fd);
    if (reexec_fallback_exe_fd >= 0) reexec_fallback.exe.Reset(reexec_fallback_exe_fd);
    // Neither leaks into a worker; ExecFallback clears the state's FD_CLOEXEC again.
    (void)supervisor::SetCloexec(reexec_state_fd);
    if (reexec_fallback_exe_fd >= 0) (void)supervisor::SetCloexec(reexec_fallback_exe_fd);
    Result<std::string> document = supervisor::ReadStateFd(reexec_state_fd);
    Result<supervisor::ReexecState> state =
        document.ok() ? supervisor::ReexecState::Decode(*document)
                      : Result<supervisor::ReexecState>(document.status());
#ifdef BULKHEAD_TEST_STATE_UNREADABLE
    // Test-only build (tests/e2e/CMakeLists.txt: bulkheadd-cannot-read-state): a new binary that
    // claims our version and cannot read the state, to drive failure 5 end to end.
    state = Status::Error("this build cannot read re-exec states (test build)");
#endif
    if (!state.ok()) {
      // The fds the state names were never touched here: still open, FD_CLOEXEC still clear.
      supervisor::ReexecFallBack(std::move(reexec_fallback), {},
                                 "the state cannot be read: " + state.status().message());
      // As PID 1 of a machine, never an exit (a kernel panic): on_shutdown's end, or a reboot.
      return supervisor::EndProcess(
          supervisor::TakeoverFailedAction(loaded.config->supervisor.on_shutdown, pid1,
                                           !container.empty()),
          kExitFailure, pid1);
    }
    reexec_state = std::move(state).value();
  }

  config::ShutdownAction on_shutdown = loaded.config->supervisor.on_shutdown;
  int exit_code = 0;
  {
    supervisor::Supervisor supervisor(std::move(*loaded.config));
    if (!log_level.empty()) supervisor.PinLogLevel(log_level);
#ifdef BULKHEAD_TEST_REEXEC_FAULTS
    // Test-only build (tests/e2e/CMakeLists.txt: bulkheadd-reexec-faults): the fault that
    // $BULKHEAD_TEST_REEXEC_FAULT names, at its failure point of docs/reexec.md.
    supervisor.SetReexecHooks(e2e::ReexecFaultsFromEnvironment());
#endif
    if (reexec_state) {
      supervisor.AdoptState(std::move(*reexec_state), std::move(reexec_fallback),
                            std::move(reexec_fell_back));
    }
    exit_code = supervisor.Run();
    if (supervisor.takeover_failed()) {
      on_shutdown = supervisor::TakeoverFailedAction(on_shutdown, pid1, !container.empty());
    }
  }
  return supervisor::EndProcess(on_shutdown, exit_code, pid1);
}
