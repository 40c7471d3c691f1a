// SPDX-License-Identifier: MIT
// libFuzzer target for FrameDecoder: arbitrary bytes, fed in arbitrary pieces through both write
// paths, must never crash, and every frame it returns must re-encode to exactly the bytes it came
// from. Built with -DBULKHEAD_FUZZ=ON and clang; run: build/tests/ipc/ipc_frame_fuzzer
// -max_total_time=60
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "base/check.h"
#include "ipc/frame.h"

namespace {

using bulkhead::ipc::AppendFrame;
using bulkhead::ipc::DecodeResult;
using bulkhead::ipc::FrameDecoder;
using bulkhead::ipc::FrameType;
using bulkhead::ipc::FrameView;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0: accepted type and a small max payload, so that kTooLarge is reachable.
  // Byte 1: seed for the piece sizes.
  const FrameType accepted = (data[0] & 1) ? FrameType::kReply : FrameType::kRequest;
  const uint32_t max_payload = (data[0] >> 1) * 4u;
  uint32_t piece_seed = data[1];
  std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  FrameDecoder decoder(accepted, max_payload);
  std::string consumed;  // input bytes given to the decoder and not yet matched to a frame
  bool failed = false;
  size_t offset = 0;
  while (offset < input.size()) {
    piece_seed = piece_seed * 1103515245u + 12345u;
    size_t piece = std::min<size_t>(1 + (piece_seed >> 16) % 64, input.size() - offset);
    std::string_view bytes = input.substr(offset, piece);
    offset += piece;
    if (piece_seed & 1) {
      decoder.Feed(bytes);
    } else {
      std::span<char> region = decoder.PrepareWrite(bytes.size());
      BH_CHECK(region.size() >= bytes.size());
      std::memcpy(region.data(), bytes.data(), bytes.size());
      decoder.Commit(bytes.size());
    }
    consumed.append(bytes);
    FrameView frame;
    DecodeResult result;
    while ((result = decoder.Next(&frame)) == DecodeResult::kFrame) {
      BH_CHECK(!failed);
      BH_CHECK(frame.header.type == accepted);
      BH_CHECK(frame.payload.size() == frame.header.payload_size);
      BH_CHECK(frame.payload.size() <= max_payload);
      std::string reencoded;
      AppendFrame(&reencoded, frame.header, frame.payload);
      BH_CHECK(consumed.compare(0, reencoded.size(), reencoded) == 0);
      consumed.erase(0, reencoded.size());
    }
    if (result == DecodeResult::kError) {
      failed = true;
      BH_CHECK(decoder.failed());
      BH_CHECK(!decoder.error_message().empty());
      BH_CHECK(decoder.buffered_bytes() == 0);
    } else {
      BH_CHECK(!failed);
      BH_CHECK(decoder.buffered_bytes() == consumed.size());
    }
  }
  return 0;
}
