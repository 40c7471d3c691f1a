// SPDX-License-Identifier: MIT
#include "lifecycle/http_probe.h"

#include <utility>

#include "base/check.h"
#include "http/probe.h"

namespace bulkhead::lifecycle {

struct HttpProbe::Attempt {
  HttpProbe* probe = nullptr;  // null once cancelled or finished: callbacks then only clean up
  uv_pipe_t pipe{};
  uv_connect_t connect{};
  uv_write_t write{};
  std::string request;
  http::ProbeResponse response;
  std::function<void(const Outcome&)> done;
  char buffer[4096];
  bool closing = false;

  // Bytes of the answer (nread > 0), its end (UV_EOF) or a read error (after the head of the
  // answer, a reset ends it as a close does: the verdict is its status).
  void OnRead(ssize_t nread, const uv_buf_t* read) {
    if (nread < 0 && nread != UV_EOF && response.status_code() == 0) {
      probe->Finish(this, {false, std::string("read: ") + uv_strerror(static_cast<int>(nread))});
      return;
    }
    const http::ProbeResponse::Result result =
        nread > 0 ? response.Feed(std::string_view(read->base, static_cast<size_t>(nread)))
                  : response.Closed();
    switch (result) {
      case http::ProbeResponse::Result::kNeedMore:
        return;
      case http::ProbeResponse::Result::kError:
        probe->Finish(this, {false, response.error()});
        return;
      case http::ProbeResponse::Result::kStatus: {
        const int code = response.status_code();
        probe->Finish(this, {http::ProbeHealthy(code), std::to_string(code)});
        return;
      }
    }
  }

  void Close() {
    if (closing) return;
    closing = true;
    probe = nullptr;
    // The pending connect and write requests are cancelled by the close (UV_ECANCELED) and
    // their callbacks run before the close callback: `this` lives until then.
    uv_close(reinterpret_cast<uv_handle_t*>(&pipe),
             [](uv_handle_t* handle) { delete static_cast<Attempt*>(handle->data); });
  }
};

HttpProbe::~HttpProbe() { BH_CHECK(attempt_ == nullptr); }

void HttpProbe::Start(const std::string& socket_path, const std::string& path,
                      std::function<void(const Outcome&)> done) {
  BH_CHECK(attempt_ == nullptr);
  auto* attempt = new Attempt;
  attempt->probe = this;
  attempt->request = http::ProbeRequest(path);
  attempt->done = std::move(done);
  uv_pipe_init(loop_, &attempt->pipe, 0);
  attempt->pipe.data = attempt;
  attempt->connect.data = attempt;
  attempt->write.data = attempt;
  attempt_ = attempt;
  uv_pipe_connect(
      &attempt->connect, &attempt->pipe, socket_path.c_str(), [](uv_connect_t* req, int status) {
        auto* a = static_cast<Attempt*>(req->data);
        if (a->probe == nullptr) return;
        if (status != 0) {
          a->probe->Finish(a, {false, std::string("connect: ") + uv_strerror(status)});
          return;
        }
        auto* stream = reinterpret_cast<uv_stream_t*>(&a->pipe);
        uv_buf_t buf = uv_buf_init(a->request.data(), static_cast<unsigned>(a->request.size()));
        int rc = uv_write(&a->write, stream, &buf, 1, [](uv_write_t* w, int status) {
          auto* a = static_cast<Attempt*>(w->data);
          if (a->probe == nullptr || status == 0) return;
          a->probe->Finish(a, {false, std::string("write: ") + uv_strerror(status)});
        });
        if (rc == 0) {
          rc = uv_read_start(
              stream,
              [](uv_handle_t* handle, size_t, uv_buf_t* out) {
                auto* a = static_cast<Attempt*>(handle->data);
                *out = uv_buf_init(a->buffer, sizeof a->buffer);
              },
              [](uv_stream_t* s, ssize_t nread, const uv_buf_t* read) {
                auto* a = static_cast<Attempt*>(s->data);
                if (a->probe == nullptr || nread == 0) return;
                a->OnRead(nread, read);
              });
        }
        if (rc != 0) a->probe->Finish(a, {false, std::string("send: ") + uv_strerror(rc)});
      });
}

void HttpProbe::Finish(Attempt* attempt, const Outcome& outcome) {
  BH_CHECK(attempt == attempt_);
  attempt_ = nullptr;
  std::function<void(const Outcome&)> done = std::move(attempt->done);
  attempt->Close();
  // Last: `done` may start the next attempt, or destroy this probe's owner's interest in it.
  done(outcome);
}

int HttpProbe::status_code() const {
  return attempt_ == nullptr ? 0 : attempt_->response.status_code();
}

void HttpProbe::Cancel() {
  if (attempt_ == nullptr) return;
  std::exchange(attempt_, nullptr)->Close();
}

}  // namespace bulkhead::lifecycle
