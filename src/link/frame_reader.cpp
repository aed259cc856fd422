#include "link/frame_reader.hpp"

namespace strata::link {

void FrameReader::header_read(std::size_t n) {
  got_ += n;
  if (got_ < kHeaderBytes) return;
  header_ = cursor_.check(raw_.data(), max_length_);
  state_ = State::decide;
  got_ = 0;
}

bool FrameReader::finish() {
  state_ = State::header;
  dropping_ = false;
  return cursor_.arrived(header_.h, crc_, checksum_);
}

}  // namespace strata::link
