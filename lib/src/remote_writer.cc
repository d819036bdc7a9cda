// Writing a blob to object storage: the blob is written to a private local
// staging folder, then uploaded as one multipart upload, which S3 makes
// visible under the key only when complete (docs/OBJECT_STORAGE.md).
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "imagepack/byte_source.h"
#include "s3_client.h"
#include "store_internal.h"
#include "fd_io.h"

namespace imagepack::internal {
namespace fs = std::filesystem;
namespace {

class UploadingWriter : public RecordWriter {
 public:
  UploadingWriter(std::string url, std::string staging_dir, std::string staged,
                  std::unique_ptr<RecordWriter> inner, bool overwrite)
      : url_(std::move(url)), dir_(std::move(staging_dir)), staged_(std::move(staged)), inner_(std::move(inner)),
        overwrite_(overwrite) {}
  ~UploadingWriter() override {
    inner_.reset();  // removes its temporary if not finished
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Status Add(std::vector<uint8_t>&& record) override { return inner_->Add(std::move(record)); }
  Status Finish(const DatasetMeta& meta) override {
    IMAGEPACK_RETURN_IF_ERROR(inner_->Finish(meta));
    UploadOptions uo;
    uo.part_mb = 0;
    uo.overwrite = overwrite_;
    Status st = UploadFile(staged_, url_, uo);
    std::error_code ec;
    fs::remove(staged_, ec);
    return st;
  }
  int64_t count() const override { return inner_->count(); }
  Status status() const override { return inner_->status(); }
  bool TakeSpareBuffer(std::vector<uint8_t>* buffer) override { return inner_->TakeSpareBuffer(buffer); }
  ParallelRecordWriter* parallel() override { return inner_->parallel(); }

 private:
  std::string url_, dir_, staged_;
  std::unique_ptr<RecordWriter> inner_;
  bool overwrite_;
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> NewUploadingWriter(ContainerFormat format, const std::string& url,
                                                         const WriterOptions& opts) {
  if (format != ContainerFormat::kBlob)
    return Status::InvalidArgument(url + ": only blobs are written to object storage (an LMDB needs a local "
                                         "memory map): use --format blob");
  auto parsed = ParseObjectUrl(url);
  if (!parsed.ok()) return parsed.status();
  // Fails early (credentials, bucket, an existing object) rather than after packing.
  auto exists = ObjectExists(url);
  if (!exists.ok()) return exists.status();
  if (exists.value() && !opts.overwrite)
    return Status::InvalidArgument(url + " already exists (use --overwrite to replace it)");
  auto staging = MakeStagingDir("upload");
  if (!staging.ok()) return staging.status();
  const std::string tmpl = staging.value();
  const std::string staged = (fs::path(tmpl) / fs::path(parsed->key).filename()).string();
  auto tmp = CreateTempFor(staged, 0600);
  if (!tmp.ok()) {
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    return tmp.status();
  }
  auto inner = NewBlobWriter(staged, std::move(tmp.value()), opts.direct_io, opts.blob_index_chunk_shift,
                             opts.blob_index_memory);
  if (!inner.ok()) {
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    return inner.status();
  }
  return std::unique_ptr<RecordWriter>(
      new UploadingWriter(url, tmpl, staged, std::move(inner.value()), opts.overwrite));
}

}  // namespace imagepack::internal
