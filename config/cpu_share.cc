// SPDX-License-Identifier: MIT
// ParseCpuShare: a hand-written scanner over "<integer>[.<digits>]%"; CpuQuotaUs: integer
// arithmetic only. Pure functions; thread-safe.
#include "config/cpu_share.h"

#include <algorithm>
#include <string>

#include "base/ascii.h"
namespace bulkhead::config {
namespace {

constexpr std::string_view kAcceptedForm =
    "expected a share of one CPU as a percentage string such as \"50%\", \"150%\" (1.5 CPUs) or "
    "\"12.5%\" (at most 3 decimals)";
constexpr size_t kMaxDecimals = 3;

Status Refuse(std::string_view text, std::string_view problem) {
  std::string message = "invalid CPU share \"";
  message.append(text);
  message += "\": ";
  message.append(problem);
  message += "; ";
  message.append(kAcceptedForm);
  return Status::Error(std::move(message));
}

}  // namespace

Result<uint64_t> ParseCpuShare(std::string_view text) {
  if (text.empty()) return Refuse(text, "empty");
  if (const size_t hash = text.find('#'); hash != std::string_view::npos) {
    std::string_view before = text.substr(0, hash);
    while (!before.empty() && IsAsciiSpace(before.back())) before.remove_suffix(1);
    return Refuse(text, "a '#' inside the quotes is not a comment; end the string before it: \"" +
                            std::string(before) + "\"  # ...");
  }
  if (std::any_of(text.begin(), text.end(), IsAsciiSpace)) {
    return Refuse(text, "spaces are not allowed");
  }
  if (text.front() == '+' || text.front() == '-') return Refuse(text, "a sign is not allowed");

  // Whole percent, then up to kMaxDecimals decimals, in thousandths, saturating above the limit.
  size_t i = 0;
  uint64_t share = 0;
  while (i < text.size() && IsAsciiDigit(text[i])) {
    share = std::min<uint64_t>(share * 10 + static_cast<uint64_t>(text[i] - '0'),
                               kMaxCpuShare / kCpuShareScale + 1);
    ++i;
  }
  if (i == 0) {
    if (text.front() == '.') return Refuse(text, "missing digit before '.'; write \"0.5%\"");
    return Refuse(text, "missing number");
  }
  share *= kCpuShareScale;
  if (i < text.size() && text[i] == ',') {
    return Refuse(text, "the decimal point is '.', not ','");
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t decimals_begin = i;
    uint64_t place = kCpuShareScale;
    while (i < text.size() && IsAsciiDigit(text[i])) {
      if (i - decimals_begin == kMaxDecimals) {
        return Refuse(text, "more than 3 decimals");
      }
      place /= 10;
      share += place * static_cast<uint64_t>(text[i] - '0');
      ++i;
    }
    if (i == decimals_begin) return Refuse(text, "missing digits after '.'");
  }
  if (i == text.size()) {
    return Refuse(text, "missing '%'; write \"" + std::string(text) + "%\" for " +
                            std::string(text) + "% of one CPU");
  }
  if (text[i] != '%') {
    return Refuse(text, "unexpected character '" + std::string(1, text[i]) + "'");
  }
  if (i + 1 != text.size()) {
    return Refuse(text, "unexpected character '" + std::string(1, text[i + 1]) + "' after '%'");
  }
  if (share == 0) {
    return Refuse(text, "must be greater than 0%; leave cpu_max out for no limit");
  }
  if (share > kMaxCpuShare) {
    return Refuse(text,
                  "above the maximum of " + std::to_string(kMaxCpuShare / kCpuShareScale) + "%");
  }
  return share;
}

uint64_t CpuQuotaUs(uint64_t share, uint64_t period_us) {
  // At most 1e10 × 1e6 = 1e16: no overflow.
  constexpr uint64_t kPercentScale = 100 * kCpuShareScale;
  return (share * period_us + kPercentScale / 2) / kPercentScale;
}

}  // namespace bulkhead::config
