// SPDX-License-Identifier: MIT
#include "bench/nginx_process.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/unique_fd.h"
#include "bench/sockets.h"
#include "bench/stage_support.h"

namespace bulkhead::bench {

std::string NginxProcess::Config(const NginxOptions& options) {
  const std::string& d = options.dir;
  std::ostringstream c;
  c << "daemon off;\n"
    << "master_process off;          # one process: the one that serves, and whose CPU is read\n"
    << "worker_processes 1;\n"
    << "pid " << d << "/nginx.pid;\n"
    << "error_log " << d << "/error.log warn;\n"
    << "events {\n"
    << "    worker_connections 4096;\n"
    << "}\n"
    << "http {\n"
    << "    access_log off;\n"
    << "    client_body_temp_path " << d << "/tmp/body;\n"
    << "    proxy_temp_path " << d << "/tmp/proxy;\n"
    << "    fastcgi_temp_path " << d << "/tmp/fastcgi;\n"
    << "    uwsgi_temp_path " << d << "/tmp/uwsgi;\n"
    << "    scgi_temp_path " << d << "/tmp/scgi;\n"
    << "    keepalive_timeout 60s;\n"
    << "    keepalive_requests 1000000;  # the default, 1000, would close wrk's connections\n"
    << "    upstream worker {\n"
    << "        server unix:" << options.worker_socket << ";\n"
    << "        keepalive " << options.keepalive << ";\n"
    << "        keepalive_requests 1000000;\n"
    << "        keepalive_timeout 60s;\n"
    << "    }\n"
    << "    server {\n"
    << "        listen 127.0.0.1:" << options.port << ";\n"
    << "        location / {\n"
    << "            proxy_pass http://worker;\n"
    << "            proxy_http_version 1.1;\n"
    << "            proxy_set_header Connection \"\";\n"
    << "        }\n"
    << "    }\n"
    << "}\n";
  return c.str();
}

Status NginxProcess::Start(const NginxOptions& options, std::chrono::milliseconds timeout) {
  dir_ = options.dir;
  for (const std::string& sub :
       {std::string("/tmp"), std::string("/tmp/body"), std::string("/tmp/proxy"),
        std::string("/tmp/fastcgi"), std::string("/tmp/uwsgi"), std::string("/tmp/scgi")}) {
    const std::string path = dir_ + sub;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::FromErrno("mkdir " + path);
  }
  const std::string config_path = dir_ + "/nginx.conf";
  Status written = WriteText(config_path, Config(options));
  if (!written.ok()) return written;
  const std::string log_path = dir_ + "/nginx.log";
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return Status::FromErrno("open " + log_path);
  proc::ChildOptions child{
      .argv = {options.binary, "-p", dir_, "-c", config_path, "-e", dir_ + "/error.log"},
      .stdout_fd = log.get(),
      .stderr_fd = log.get()};
  Result<proc::ChildProcess> started = proc::ChildProcess::Start("nginx", child);
  if (!started.ok()) return started.status();
  process_ = std::move(started).value();
  proc::WaitOutcome outcome =
      process_.WaitUntil([&] { return AcceptsOnLoopback(options.port); }, timeout);
  if (outcome == proc::WaitOutcome::kReady) return Status::Ok();
  if (outcome == proc::WaitOutcome::kExited) {
    return Status::Error("nginx exited with " + process_.exit_description() + ":\n" + Log());
  }
  return Status::Error("nginx did not accept on 127.0.0.1:" + std::to_string(options.port) +
                       " within " + std::to_string(timeout.count()) + " ms");
}

Status NginxProcess::Stop(std::chrono::milliseconds grace) {
  if (process_.pid() <= 0) return Status::Ok();
  return process_.StopExpecting(grace, {"signal 15", "exit 0"});
}

std::string NginxProcess::Log() const {
  return ReadText(dir_ + "/nginx.log") + ReadText(dir_ + "/error.log");
}

}  // namespace bulkhead::bench
