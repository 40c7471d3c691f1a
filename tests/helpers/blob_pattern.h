// SPDX-License-Identifier: MIT
// BlobPattern: deterministic bytes for large-payload tests, produced by bulkhead-test-worker's
// `blob N` and checked byte for byte by the tests. Not a multiple of any buffer size, so a byte
// lost, duplicated or reordered at a chunk boundary changes what follows. Header-only: the test
// worker links no test library.
#pragma once

#include <cstddef>
#include <string>

namespace bulkhead::testing {

// `size` bytes; byte i is (i * 31 + i / 251) mod 256.
inline std::string BlobPattern(size_t size) {
  std::string blob(size, '\0');
  for (size_t i = 0; i < size; ++i) blob[i] = static_cast<char>((i * 31 + i / 251) & 0xff);
  return blob;
}

}  // namespace bulkhead::testing
