// SPDX-License-Identifier: MIT
#include "proxy/wire.h"

#include "http/local_reply.h"
#include "proxy/front_connection.h"
#include "proxy/http_front_connection.h"
#include "proxy/http_worker_link.h"
#include "proxy/worker_link.h"

namespace bulkhead::proxy {

namespace {

Result<Link*> ConnectFrames(LinkOwner* owner, uv_loop_t* loop, const std::string& path,
                            const LinkSettings& settings) {
  Result<WorkerLink*> link =
      WorkerLink::Connect(owner, loop, path, settings.max_payload, settings.multiplexed);
  if (!link.ok()) return link.status();
  return static_cast<Link*>(*link);
}

Result<Link*> ConnectHttp(LinkOwner* owner, uv_loop_t* loop, const std::string& path,
                          const LinkSettings& settings) {
  Result<HttpWorkerLink*> link = HttpWorkerLink::Connect(owner, loop, path, settings.write_batch);
  if (!link.ok()) return link.status();
  return static_cast<Link*>(*link);
}

int NoStatus(const Outcome&) { return 0; }

int HttpLocalStatus(const Outcome& outcome) {
  return http::StatusCodeFor(outcome.kind == Outcome::Kind::kRejected ? ipc::ReplyStatus::kRejected
                                                                      : ipc::ReplyStatus::kFailed,
                             outcome.reason);
}

constexpr Wire kFrames{&FrontConnection::Accept, &FrontConnection::Adopt,
                       &FrontConnection::AppendRefusal, &ConnectFrames, &NoStatus};
constexpr Wire kHttp{&HttpFrontConnection::Accept, &HttpFrontConnection::Adopt,
                     &HttpFrontConnection::AppendRefusal, &ConnectHttp, &HttpLocalStatus};

}  // namespace

const Wire& WireFor(config::Protocol protocol) {
  return protocol == config::Protocol::kHttp ? kHttp : kFrames;
}

}  // namespace bulkhead::proxy
