// libFuzzer target: the record parser (lib/src/record.cc) on arbitrary bytes,
// with and without checksum verification. A record that parses must point
// inside the input, agree with its own length fields, and re-encode to the
// same bytes.
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "imagepack/record.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Half the inputs get a valid checksum so the checks behind it are reached.
  std::vector<uint8_t> rec(data, data + size);
  if (size > 0 && (data[size - 1] & 1)) fuzz::RepairRecordChecksum(rec.data(), rec.size());
  for (bool verify : {true, false}) {
    auto r = ParseRecord(rec.data(), rec.size(), verify);
    if (!r.ok()) {
      FUZZ_CHECK(!r.status().message().empty());
      continue;
    }
    const RecordView& v = *r;
    const uint8_t* begin = rec.data();
    const uint8_t* end = begin + rec.size();
    FUZZ_CHECK(rec.size() == kRecordHeaderSize + v.path.size() + v.payload_size + v.fields.fields_size);
    FUZZ_CHECK(reinterpret_cast<const uint8_t*>(v.path.data()) >= begin + kRecordHeaderSize);
    FUZZ_CHECK(v.payload >= begin && v.payload + v.payload_size <= end);
    FUZZ_CHECK(v.fields.channels == 1 || v.fields.channels == 3);
    if (v.fields.encoding == Encoding::kRaw)
      FUZZ_CHECK(v.payload_size == uint64_t(v.fields.height) * v.fields.width * v.fields.channels);
    // Every field lies inside the record and agrees with its geometry.
    for (const FieldView& f : RecordFieldViews(v)) {
      FUZZ_CHECK(f.data >= v.payload + v.payload_size && f.data + f.size <= end);
      FUZZ_CHECK(CheckFieldLayout(f).ok());
    }
    if (verify) {
      // A record whose checksum holds is exactly what EncodeRecord makes.
      auto again = EncodeRecord(v.fields, v.path, v.payload, v.payload_size, v.field_data);
      FUZZ_CHECK(again.size() == rec.size());
      FUZZ_CHECK(std::memcmp(again.data(), rec.data(), rec.size()) == 0);
    }
  }
  return 0;
}
