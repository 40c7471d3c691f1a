// SPDX-License-Identifier: MIT
#include "base/closest_match.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/ascii.h"

namespace bulkhead {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string_view ClosestMatch(std::string_view word, std::span<const std::string_view> candidates) {
  // Compared in lower case: the same word in other letter case ("Catalog", "MAX_QUEUE") is at
  // distance 0, and so the match whatever its length.
  constexpr size_t kMaxEdits = 2;
  const std::string lower_word = ToLowerAscii(word);
  std::string_view best;
  size_t best_distance = kMaxEdits + 1;
  for (std::string_view candidate : candidates) {
    const size_t length_gap = word.size() > candidate.size() ? word.size() - candidate.size()
                                                             : candidate.size() - word.size();
    if (length_gap > kMaxEdits) continue;
    const size_t distance = EditDistance(lower_word, ToLowerAscii(candidate));
    if (distance < best_distance && distance < word.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string DidYouMean(std::string_view word, std::span<const std::string_view> candidates) {
  const std::string_view closest = ClosestMatch(word, candidates);
  if (closest.empty()) return "";
  std::string tail = "; did you mean \"";
  tail.append(closest);
  return tail + "\"?";
}

}  // namespace bulkhead
