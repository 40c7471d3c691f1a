// SPDX-License-Identifier: MIT
#include "bench/haproxy_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <sstream>

#include "base/unique_fd.h"
#include "bench/sockets.h"
#include "bench/stage_support.h"
#include "ipc/client.h"

namespace bulkhead::bench {

namespace {

bool Accepts(const HaproxyOptions& options) {
  if (options.front_port != 0) return AcceptsOnLoopback(options.front_port);
  return ipc::ConnectUnix(options.front_socket).ok();
}

std::string FrontName(const HaproxyOptions& options) {
  if (options.front_port != 0) return "127.0.0.1:" + std::to_string(options.front_port);
  return options.front_socket;
}

}  // namespace

std::string HaproxyProcess::Config(const HaproxyOptions& options) {
  std::ostringstream c;
  c << "global\n"
    << "    nbthread 1\n"
    << "    maxconn 2000\n"
    << "defaults\n"
    << "    mode " << (options.http ? "http" : "tcp") << "\n"
    << "    timeout connect 5s\n"
    << "    timeout client 60s\n"
    << "    timeout server 60s\n"
    << "    timeout queue " << options.queue_timeout.count() << "ms\n";
  if (options.http) {
    c << "    timeout http-keep-alive 60s\n"
      << "    option http-keep-alive\n";
  }
  c << "frontend bench\n"
    << "    bind "
    << (options.front_port != 0 ? FrontName(options) : "unix@" + options.front_socket) << "\n"
    << "    default_backend worker\n"
    << "backend worker\n";
  // Idle connections to the worker serve any client's next request, as bulkheadd's worker links.
  if (options.http) c << "    http-reuse always\n";
  c << "    server worker unix@" << options.worker_socket << " maxconn " << options.maxconn;
  if (options.http && options.maxqueue > 0) c << " maxqueue " << options.maxqueue;
  c << "\n";
  return c.str();
}

Status HaproxyProcess::Start(const HaproxyOptions& options, std::chrono::milliseconds timeout) {
  const std::string config_path = options.dir + "/haproxy.cfg";
  Status written = WriteText(config_path, Config(options));
  if (!written.ok()) return written;
  log_path_ = options.dir + "/haproxy.log";
  UniqueFd log(::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return Status::FromErrno("open " + log_path_);
  proc::ChildOptions child{.argv = {options.binary, "-db", "-f", config_path},
                           .stdout_fd = log.get(),
                           .stderr_fd = log.get()};
  Result<proc::ChildProcess> started = proc::ChildProcess::Start("haproxy", child);
  if (!started.ok()) return started.status();
  process_ = std::move(started).value();
  proc::WaitOutcome outcome = process_.WaitUntil([&] { return Accepts(options); }, timeout);
  if (outcome == proc::WaitOutcome::kReady) return Status::Ok();
  if (outcome == proc::WaitOutcome::kExited) {
    return Status::Error("haproxy exited with " + process_.exit_description() + ":\n" + Log());
  }
  return Status::Error("haproxy did not accept on " + FrontName(options) + " within " +
                       std::to_string(timeout.count()) + " ms");
}

Status HaproxyProcess::Stop(std::chrono::milliseconds grace) {
  if (process_.pid() <= 0) return Status::Ok();
  return process_.StopExpecting(grace, {"signal 15", "exit 0"});
}

std::string HaproxyProcess::Log() const { return ReadText(log_path_); }

}  // namespace bulkhead::bench
