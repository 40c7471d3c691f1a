// SPDX-License-Identifier: MIT
// CellCounterFields: one table of the counters of admission::CellCounters, each with its name in
// the status JSON (docs/control.md, "status response") and its metric family and labels in the
// metrics text (docs/metrics.md). CellStatusJson and MetricsText both render from it, so a counter
// cannot be shown by one and forgotten by the other; a static_assert below fails the build when a
// CellCounters member is missing from it. Constant data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "admission/cell_counters.h"

namespace bulkhead::control {

// A metric family (Prometheus counter) that counters are samples of.
struct CounterMetric {
  std::string_view name;
  std::string_view help;
};

inline constexpr CounterMetric kRequestsTotal{
    "bulkhead_requests_total",
    "Requests that reached an outcome, by outcome (ok, rejected, failed, cancelled, dropped, "
    "undelivered) and reason."};
inline constexpr CounterMetric kRequestsAdmittedTotal{"bulkhead_requests_admitted_total",
                                                      "Requests that got a slot or a queue place."};
inline constexpr CounterMetric kRequestsRejectedAtAdmissionTotal{
    "bulkhead_requests_rejected_at_admission_total",
    "Requests rejected before admission (full, or unavailable while the cell refuses)."};
inline constexpr CounterMetric kBadRequestsTotal{
    "bulkhead_bad_requests_total", "Malformed request frames; each closed its client connection."};
inline constexpr CounterMetric kConnectionsRefusedTotal{
    "bulkhead_connections_refused_total",
    "Client connections refused at accept (REJECTED too_many_connections, or 503 on an HTTP "
    "cell) for being over connection_limit; connections, not requests."};
inline constexpr CounterMetric kConnectionsIdleClosedTotal{
    "bulkhead_connections_idle_closed_total",
    "Client connections closed after idle_timeout (or, on an HTTP cell, header_timeout) with no "
    "request in flight; connections, not requests."};

struct CellCounterField {
  uint64_t admission::CellCounters::*member;
  // The status JSON shows it as `json_name` in the cell's object, or in its member object
  // `json_object` ("rejected_by_reason") when that is not empty.
  std::string_view json_object;
  std::string_view json_name;
  // The family it is a sample of; nullptr for a counter that only the status JSON shows.
  const CounterMetric* metric;
  // The sample's `outcome` and `reason` labels (after `cell`); empty for a family without them.
  std::string_view outcome;
  std::string_view reason;
};

// In metrics text order: the samples of one family are next to each other, in the order they are
// written for each cell.
inline constexpr std::array kCellCounterFields = {
    CellCounterField{&admission::CellCounters::ok, "", "ok", &kRequestsTotal, "ok", "none"},
    CellCounterField{&admission::CellCounters::rejected_full, "rejected_by_reason", "full",
                     &kRequestsTotal, "rejected", "full"},
    CellCounterField{&admission::CellCounters::rejected_queue_timeout, "rejected_by_reason",
                     "queue_timeout", &kRequestsTotal, "rejected", "queue_timeout"},
    CellCounterField{&admission::CellCounters::rejected_unavailable, "rejected_by_reason",
                     "unavailable", &kRequestsTotal, "rejected", "unavailable"},
    CellCounterField{&admission::CellCounters::failed_worker_error, "failed_by_reason",
                     "worker_error", &kRequestsTotal, "failed", "worker_error"},
    CellCounterField{&admission::CellCounters::failed_worker_died, "failed_by_reason",
                     "worker_died", &kRequestsTotal, "failed", "worker_died"},
    CellCounterField{&admission::CellCounters::failed_oom_killed, "failed_by_reason", "oom_killed",
                     &kRequestsTotal, "failed", "oom_killed"},
    CellCounterField{&admission::CellCounters::failed_timeout, "failed_by_reason", "timeout",
                     &kRequestsTotal, "failed", "timeout"},
    CellCounterField{&admission::CellCounters::failed_stalled, "failed_by_reason", "stalled",
                     &kRequestsTotal, "failed", "stalled"},
    CellCounterField{&admission::CellCounters::cancelled, "", "cancelled", &kRequestsTotal,
                     "cancelled", "client_gone"},
    CellCounterField{&admission::CellCounters::dropped, "", "dropped", &kRequestsTotal, "dropped",
                     "client_gone"},
    CellCounterField{&admission::CellCounters::undelivered, "", "undelivered", &kRequestsTotal,
                     "undelivered", "client_gone"},
    CellCounterField{&admission::CellCounters::admitted, "", "admitted", &kRequestsAdmittedTotal,
                     "", ""},
    CellCounterField{&admission::CellCounters::rejected_at_admission, "", "rejected_at_admission",
                     &kRequestsRejectedAtAdmissionTotal, "", ""},
    CellCounterField{&admission::CellCounters::bad_request, "", "bad_request", &kBadRequestsTotal,
                     "", ""},
    // Connections, not requests: in no request family.
    CellCounterField{&admission::CellCounters::refused_connections, "", "connections_refused",
                     &kConnectionsRefusedTotal, "", ""},
    CellCounterField{&admission::CellCounters::idle_closed, "", "connections_idle_closed",
                     &kConnectionsIdleClosedTotal, "", ""},
};

namespace internal {

// Every member once: with as many fields as CellCounters has uint64_t members, every member.
constexpr bool EveryCounterOnce() {
  if (kCellCounterFields.size() * sizeof(uint64_t) != sizeof(admission::CellCounters)) {
    return false;
  }
  for (size_t i = 0; i < kCellCounterFields.size(); ++i) {
    for (size_t j = i + 1; j < kCellCounterFields.size(); ++j) {
      if (kCellCounterFields[i].member == kCellCounterFields[j].member) return false;
    }
  }
  return true;
}

// A family's fields are next to each other, so that it is written under one HELP/TYPE header.
constexpr bool FamiliesAreContiguous() {
  for (size_t i = 0; i < kCellCounterFields.size(); ++i) {
    for (size_t j = i + 2; j < kCellCounterFields.size(); ++j) {
      const CounterMetric* m = kCellCounterFields[i].metric;
      if (m != nullptr && kCellCounterFields[j].metric == m &&
          kCellCounterFields[j - 1].metric != m) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace internal

static_assert(internal::EveryCounterOnce(),
              "every admission::CellCounters member needs one entry in kCellCounterFields");
static_assert(internal::FamiliesAreContiguous(),
              "the fields of one metric family must be next to each other in kCellCounterFields");

}  // namespace bulkhead::control
