// A file's descriptor as a ByteSource: reads with pread, hints, identity
// and page-cache residency. It does not own the descriptor (liblmdb's, for
// an LMDB file); the byte source of a path owns its own and adds Map().
#ifndef IMAGEPACK_SRC_DESCRIPTOR_SOURCE_H_
#define IMAGEPACK_SRC_DESCRIPTOR_SOURCE_H_

#include <sys/stat.h>

#include <string>

#include "imagepack/byte_source.h"

namespace imagepack::internal {

class DescriptorSource : public ByteSource {
 public:
  DescriptorSource(int fd, std::string path, const struct stat& st) : fd_(fd), path_(std::move(path)), st_(st) {}
  uint64_t size() const override { return static_cast<uint64_t>(st_.st_size); }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override;
  // The device, inode, size and times: another file, or this one changed.
  std::string identity() const override;
  std::string Describe() const override { return path_; }
  void Advise(Access access) const override;
  uint64_t CachedBytes() const override;

 protected:
  const int fd_;
  const std::string path_;
  const struct stat st_;
};

}  // namespace imagepack::internal

#endif  // IMAGEPACK_SRC_DESCRIPTOR_SOURCE_H_
