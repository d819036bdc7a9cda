// libFuzzer target: TFRecord files (lib/src/formats/tfrecord.cc). The
// first byte chooses what the rest is: a TFRecord file, whose records are
// walked as the TFRecord source walks them (past a damaged header, on at
// the next header whose CRC matches; each record's Example is parsed
// whatever its data CRC says, so that mutations reach the protobuf
// reader); a bare tf.train.Example; or a DALI .idx file (after 2 bytes
// that size its data file). Every frame lies inside the file, every bytes
// value inside its record, and the values stay within their budget.
#include <cstring>
#include <string>

#include "base/limits.h"
#include "formats/tfrecord.h"
#include "fuzz_util.h"

using namespace imagepack;

namespace {

void CheckExample(const uint8_t* data, size_t size) {
  auto ex = internal::ParseTfExample(data, size);
  if (!ex.ok()) {
    FUZZ_CHECK(!ex.status().message().empty());
    return;
  }
  FUZZ_CHECK(ex->size() <= internal::limits::kTfFeatures);
  size_t values = 0;
  for (const auto& [key, f] : ex.value()) {
    FUZZ_CHECK(key.size() <= internal::limits::kNameBytes);
    for (const auto& [at, n] : f.bytes) FUZZ_CHECK(at <= size && n <= size - at);
    values += f.bytes.size() + f.floats.size() + f.ints.size();
    // a list holds one kind of value only
    FUZZ_CHECK(int(!f.bytes.empty()) + int(!f.floats.empty()) + int(!f.ints.empty()) <= 1);
  }
  FUZZ_CHECK(values <= internal::limits::kTfValues && values <= size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size == 0) return 0;
  const uint8_t mode = input[0] % 3;
  const uint8_t* data = input + 1;
  const size_t size = input_size - 1;
  if (mode == 1) {
    CheckExample(data, size);
    return 0;
  }
  if (mode == 2) {
    // The index of a data file whose size the first 2 bytes give (x 16):
    // its records in order, inside the file, never more than it holds.
    if (size < 2) return 0;
    const uint64_t data_size = (uint64_t(data[0]) | uint64_t(data[1]) << 8) * 16;
    const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
    auto idx = internal::ParseTfRecordIndex(text, "fuzz.idx", data_size);
    if (!idx.ok()) {
      FUZZ_CHECK(idx.status().message().find("fuzz.idx") == 0);
      return 0;
    }
    FUZZ_CHECK(idx->size() <= data_size / 16 && idx->size() <= text.size() / 4 + 1);
    uint64_t next = 0;
    for (const auto& [offset, n] : *idx) {
      FUZZ_CHECK(offset >= next && n >= 16 && offset <= data_size && n <= data_size - offset);
      next = offset + n;
    }
    return 0;
  }
  auto read = [&](void* buf, size_t n, uint64_t at) -> Status {
    if (at > size || n > size - at) return Status::IOError("short read");
    std::memcpy(buf, data + at, n);
    return Status::Ok();
  };
  uint64_t at = 0;
  for (int64_t record = 0;; ++record) {
    bool end = false;
    auto frame = internal::ReadTfRecordHeader(read, size, at, record, "fuzz.tfrecord", &end);
    if (end) break;
    if (!frame.ok()) {
      // As the source does: on at the next header whose CRC matches; what
      // is found there is a record that fits the file.
      auto next = internal::FindTfRecordHeader(read, size, at + 1);
      FUZZ_CHECK(next.ok() && *next > at && *next <= size);
      if (*next == size) break;
      bool found_end = false;
      FUZZ_CHECK(internal::ReadTfRecordHeader(read, size, *next, record, "fuzz.tfrecord", &found_end).ok());
      at = *next;
      continue;
    }
    FUZZ_CHECK(frame->offset == at + 12 && frame->next > at && frame->next <= size);
    FUZZ_CHECK(frame->size <= size - frame->offset);
    Status crc = internal::CheckTfRecordData(read, *frame, data + frame->offset, record, "fuzz.tfrecord");
    FUZZ_CHECK(crc.ok() || crc.message().find("fuzz.tfrecord:record ") == 0);
    CheckExample(data + frame->offset, size_t(frame->size));
    at = frame->next;
  }
  return 0;
}
