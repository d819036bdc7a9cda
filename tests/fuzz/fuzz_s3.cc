// libFuzzer target: what an S3 server and a user hand the object-storage
// backend (lib/src/storage/s3_storage.cc, http_client.cc): response bodies
// (error codes, upload ids,
// listings of incomplete uploads, read with XmlValue) and s3:// URLs. No
// input aborts, a value found lies within the body, and a URL accepted
// has a valid bucket and a key of 1-1024 bytes that encodes and prints back.
#include <string>

#include "fuzz_util.h"
#include "storage/backends.h"
#include "storage/http_client.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* tag : {"Code", "Message", "UploadId", "Upload", "Key"}) {
    size_t at = 0, end = 0;
    for (int n = 0; n < 64; ++n) {  // as AbortDangling walks <Upload> entries
      const std::string v = internal::XmlValue(text, tag, at, &end);
      if (v.empty()) break;
      FUZZ_CHECK(v.size() < text.size() && end > at && end <= text.size());
      at = end;
    }
  }
  auto url = internal::ParseObjectUrl(text);
  if (url.ok()) {
    FUZZ_CHECK(url->bucket.size() >= 3 && url->bucket.size() <= 63);
    FUZZ_CHECK(!url->key.empty() && url->key.size() <= 1024);
    FUZZ_CHECK(url->ToString() == text);
    const std::string enc = internal::UriEncode(url->key, true);
    FUZZ_CHECK(enc.size() >= url->key.size() && enc.size() <= 3 * url->key.size());
  } else {
    FUZZ_CHECK(!url.status().message().empty());
  }
  return 0;
}
