// SPDX-License-Identifier: MIT
// ClosestMatch: "did you mean" for a misspelt word (a config key, a choice, a bulkheadctl
// command), by Damerau-Levenshtein distance (optimal string alignment: insertions, deletions,
// substitutions and adjacent transpositions each count one edit).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace bulkhead {

// The candidate that is `word` in other ASCII letter case, else the one closest to `word` within 2
// edits, letter case ignored (and fewer edits than `word` has characters), or "" if there is
// none. Ties go to the earlier candidate.
std::string_view ClosestMatch(std::string_view word, std::span<const std::string_view> candidates);

// `; did you mean "CLOSEST"?` for ClosestMatch(word, candidates), or "" when it has none: the tail
// of a "no cell named Web" or "unknown command" message.
std::string DidYouMean(std::string_view word, std::span<const std::string_view> candidates);

// Edits between `a` and `b` (see above).
size_t EditDistance(std::string_view a, std::string_view b);

}  // namespace bulkhead
