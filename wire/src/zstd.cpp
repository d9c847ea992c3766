// SPDX-License-Identifier: Apache-2.0
// zstd_compress and zstd_decompress (batch.h): one frame each way, the
// decompression a stream into a buffer capped at max_bytes.
#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <zstd.h>

#include <edge_outbox/wire/batch.h>

namespace edge_outbox::cloudevents {
namespace {

struct FreeCompressionContext {
  void operator()(ZSTD_CCtx* context) const noexcept { ZSTD_freeCCtx(context); }
};

struct FreeDecompressionContext {
  void operator()(ZSTD_DCtx* context) const noexcept { ZSTD_freeDCtx(context); }
};

// The window a frame may ask for: enough for any frame whose content fits in
// max_bytes, and at least 2 MiB (level 3's window when the encoder did not
// know the size up front), never more than zstd's own default limit (128 MiB).
int window_log_limit(std::size_t max_bytes) {
  int log = 21;
  while (log < 27 && (std::size_t{1} << log) < max_bytes) ++log;
  return log;
}

std::string exceeds(std::size_t max_bytes) {
  return "decompressed size exceeds " + std::to_string(max_bytes) + " bytes";
}

}  // namespace

std::string zstd_compress(std::string_view data, int level) {
  std::unique_ptr<ZSTD_CCtx, FreeCompressionContext> context(ZSTD_createCCtx());
  if (!context) throw std::bad_alloc();
  // The content size goes in the header (the default) and a checksum at the
  // end, so that a corrupted frame is refused rather than read as other JSON.
  ZSTD_CCtx_setParameter(context.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(context.get(), ZSTD_c_checksumFlag, 1);
  std::string frame(ZSTD_compressBound(data.size()), '\0');
  std::size_t size = ZSTD_compress2(context.get(), frame.data(), frame.size(), data.data(), data.size());
  if (ZSTD_isError(size)) throw std::runtime_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(size));
  frame.resize(size);
  return frame;
}

std::string zstd_decompress(std::string_view frame, std::size_t max_bytes) {
  // The header may refuse a frame early; the output cap below is what holds.
  unsigned long long declared = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (declared != ZSTD_CONTENTSIZE_ERROR && declared != ZSTD_CONTENTSIZE_UNKNOWN && declared > max_bytes)
    throw DecodeError(exceeds(max_bytes));

  std::unique_ptr<ZSTD_DCtx, FreeDecompressionContext> context(ZSTD_createDCtx());
  if (!context) throw std::bad_alloc();
  ZSTD_DCtx_setParameter(context.get(), ZSTD_d_windowLogMax, window_log_limit(max_bytes));

  // Output goes into pieces of ZSTD_DStreamOutSize() bytes (one block), or
  // one piece of the declared size and a byte, never past max_bytes + 1 in
  // all: the byte past the cap proves the cap exceeded. Pieces, not one
  // growing string, so that a refused frame has held no more than the cap.
  const std::size_t cap = max_bytes == static_cast<std::size_t>(-1) ? max_bytes : max_bytes + 1;
  bool size_known = declared != ZSTD_CONTENTSIZE_ERROR && declared != ZSTD_CONTENTSIZE_UNKNOWN;
  std::size_t step = size_known && declared < cap ? static_cast<std::size_t>(declared) + 1 : ZSTD_DStreamOutSize();
  std::vector<std::string> pieces;
  std::size_t total = 0;
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  for (;;) {
    std::size_t room = std::min(step, cap - total);
    step = ZSTD_DStreamOutSize();
    std::string piece(room, '\0');
    ZSTD_outBuffer buffer{piece.data(), room, 0};
    std::size_t result = ZSTD_decompressStream(context.get(), &buffer, &in);
    if (ZSTD_isError(result)) throw DecodeError(std::string("corrupt zstd frame: ") + ZSTD_getErrorName(result));
    total += buffer.pos;
    if (total > max_bytes) throw DecodeError(exceeds(max_bytes));
    piece.resize(buffer.pos);
    if (!piece.empty()) pieces.push_back(std::move(piece));
    if (result == 0) break;  // the frame is complete and flushed
    // Input used up and output not full: the decoder waits for more input.
    if (in.pos == in.size && buffer.pos < room) throw DecodeError("truncated zstd frame");
  }
  if (in.pos != in.size)
    throw DecodeError(std::to_string(in.size - in.pos) + " bytes after the zstd frame (a batch is one frame)");
  if (pieces.size() == 1) return std::move(pieces.front());
  std::string out;
  out.reserve(total);
  for (const auto& piece : pieces) out += piece;
  return out;
}

}  // namespace edge_outbox::cloudevents
