// Another tool's files read as a database where they lie, without a pack:
// Hugging Face parquet shards, TFRecords and WebDataset shards
// (the registry's rows that say in_place, sources/registry.h). Each
// record is made when it is read, by the same RecordMaker and options a
// default `pack_lmdb SRC DST` uses, so a record read in place is byte for
// byte the record the import writes and the loader gives the same batches
// either way. Internal.
#pragma once

#include <memory>
#include <string>

#include "imagepack/status.h"
#include "imagepack/store.h"
#include "sources/registry.h"

namespace imagepack::internal {

// True when `path` names files OpenInPlace reads (parquet, TFRecord,
// WebDataset shards; a brace pattern or folder of them).
bool ReadsInPlace(const std::string& path);
// The same choice, with the error when the path cannot be looked at (its
// storage cannot be opened, a remote folder cannot be listed).
Result<Choice> ChooseInPlace(const std::string& path);

// Opens them. At open the source is listed (every file's record framing,
// footer or headers; parquet's image bytes, which sit in compressed pages,
// copied into one unnamed scratch file per parquet file in the cache
// folder or the temporary folder, removed with the source), and the pixel
// statistics are sampled as the pack samples them (1,024 images decoded
// at reduced scale). A record the import would skip (a CRC that does not
// match, an image missing, a row group damaged) fails the open, naming
// it, unless opts.skip_unreadable (then one warning names them): a loader
// never leaves records out in silence. Refused: in_ram (pack
// the files, then hold the database in RAM), and class-less mask fields
// (their class count needs every record).
Result<std::unique_ptr<RecordSource>> OpenInPlace(const std::string& path, const OpenOptions& opts);

}  // namespace imagepack::internal
