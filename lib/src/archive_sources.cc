// Sources whose images sit inside other containers: WebDataset tar shards
// (plain or gzipped) and LMDB databases of pickled (image bytes, label)
// values (the folder2lmdb layout). Each item is a byte range of a file
// (DatasetSource::archives), read with pread while packing; a gzipped
// shard is first inflated into a scratch file. Part of the sources module
// (sources.h).
#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "imagepack/meta.h"
#include "sources.h"
#include "store_internal.h"

namespace fs = std::filesystem;

namespace imagepack::internal {

Status OpenArchives(DatasetSource* s);

ScratchFiles::~ScratchFiles() {
  for (int fd : fds) ::close(fd);
  for (const auto& p : paths) ::unlink(p.c_str());
}

namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool IsGzipName(const std::string& p) {
  const std::string l = LowerAscii(p);
  return EndsWith(l, ".tar.gz") || EndsWith(l, ".tgz");
}
bool IsShardName(const std::string& p) { return EndsWith(LowerAscii(p), ".tar") || IsGzipName(p); }

// "shard-{000..012}.tar" -> shard-000.tar .. shard-012.tar (the webdataset
// brace pattern: one range, zero-padded to the width of its first bound).
Result<std::vector<std::string>> ExpandBraces(const std::string& pattern) {
  const auto open = pattern.find('{'), close = pattern.find('}');
  const auto dots = pattern.find("..", open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos || dots == std::string::npos || dots > close)
    return std::vector<std::string>{pattern};
  const std::string a = pattern.substr(open + 1, dots - open - 1), b = pattern.substr(dots + 2, close - dots - 2);
  if (a.empty() || b.empty() || !std::all_of(a.begin(), a.end(), ::isdigit) || !std::all_of(b.begin(), b.end(), ::isdigit))
    return Status::InvalidArgument(pattern + ": expected {FIRST..LAST} with decimal bounds");
  const long lo = std::stol(a), hi = std::stol(b);
  if (hi < lo || hi - lo > 10000000) return Status::InvalidArgument(pattern + ": empty or huge range");
  std::vector<std::string> out;
  for (long i = lo; i <= hi; ++i) {
    std::string n = std::to_string(i);
    if (n.size() < a.size()) n.insert(0, a.size() - n.size(), '0');
    out.push_back(pattern.substr(0, open) + n + pattern.substr(close + 1));
  }
  return out;
}

// Inflates a gzipped file into `out` (a scratch file).
Status Gunzip(const std::string& in, const std::string& out) {
  gzFile g = gzopen(in.c_str(), "rb");
  if (!g) return Status::IOError("cannot open " + in);
  gzbuffer(g, 1 << 20);
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    gzclose(g);
    return Status::IOError("cannot create scratch file " + out + ": " + std::strerror(errno));
  }
  std::vector<char> buf(1 << 20);
  Status st;
  for (;;) {
    const int n = gzread(g, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      st = Status::Corruption(in + ": gzip data is damaged (" + gzerror(g, &err) + ")");
      break;
    }
    if (n == 0) {
      if (!gzeof(g)) st = Status::Corruption(in + ": gzip stream ends early");
      break;
    }
    st = WriteAll(fd, buf.data(), static_cast<size_t>(n), out);
    if (!st.ok()) break;
  }
  gzclose(g);
  ::close(fd);
  return st;
}

// One regular member of a tar file.
struct TarMember {
  std::string name;
  uint64_t offset = 0;  // of its data in the file
  uint64_t size = 0;
};

uint64_t Octal(const char* p, size_t n) {
  if (n > 0 && (static_cast<unsigned char>(p[0]) & 0x80)) {  // GNU base-256 for large sizes
    uint64_t v = static_cast<unsigned char>(p[0]) & 0x7f;
    for (size_t i = 1; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\0')) ++i;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i) v = v * 8 + uint64_t(p[i] - '0');
  return v;
}

std::string CString(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

Status ReadExact(int fd, void* buf, size_t n, uint64_t at, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::IOError(path + ": read failed: " + std::strerror(errno));
    if (r == 0) return Status::Corruption(path + ": ends inside a member at byte " + std::to_string(at + done));
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

// The regular members of a (ustar, GNU or pax) tar file, in order. Long
// names come from GNU 'L' records or pax "path" keys.
Result<std::vector<TarMember>> ListTar(const std::string& path, const std::string& shown) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot open " + shown + ": " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  std::vector<TarMember> out;
  std::string long_name;
  uint64_t at = 0;
  char h[512];
  Status status;
  bool ended = false;
  while (at + 512 <= file_size) {
    status = ReadExact(fd, h, 512, at, shown);
    if (!status.ok()) break;
    if (std::all_of(h, h + 512, [](char c) { return c == 0; })) {  // end of archive
      ended = true;
      break;
    }
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (sum != Octal(h + 148, 8)) {
      status = Status::Corruption(shown + ": not a tar file, or damaged: bad header checksum at byte " +
                                std::to_string(at));
      break;
    }
    const uint64_t size = Octal(h + 124, 12);
    const char type = h[156];
    const uint64_t data = at + 512;
    if (data + size > file_size) {
      status = Status::Corruption(shown + ": member at byte " + std::to_string(at) + " runs past the end (" +
                                std::to_string(file_size) + " bytes): the shard is truncated");
      break;
    }
    std::string name = CString(h, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') name = CString(h + 345, 155) + "/" + name;
    if (type == 'L' || type == 'x') {
      std::string body(size, '\0');
      status = ReadExact(fd, body.data(), size, data, shown);
      if (!status.ok()) break;
      if (type == 'L') {
        long_name = CString(body.data(), body.size());
      } else {  // pax records: "LEN key=value\n"
        for (size_t p = 0; p < body.size();) {
          const size_t sp = body.find(' ', p);
          if (sp == std::string::npos) break;
          const size_t len = std::stoul(body.substr(p, sp - p));
          if (len == 0 || p + len > body.size()) break;
          const std::string rec = body.substr(sp + 1, p + len - sp - 2);
          if (rec.rfind("path=", 0) == 0) long_name = rec.substr(5);
          p += len;
        }
      }
    } else if (type == '0' || type == '\0' || type == '7') {
      out.push_back({long_name.empty() ? name : long_name, data, size});
      long_name.clear();
    } else {
      long_name.clear();  // directories, links, global pax headers: nothing to pack
    }
    at = data + (size + 511) / 512 * 512;
  }
  ::close(fd);
  if (!status.ok()) return status;
  if (!ended)
    return Status::Corruption(shown + ": no end-of-archive block after byte " + std::to_string(at) +
                              ": the shard is truncated");
  return out;
}

// webdataset's rule: a member "dir/base.ext1.ext2" belongs to sample
// "dir/base" as its "ext1.ext2".
std::pair<std::string, std::string> KeyAndExtension(const std::string& name) {
  const auto slash = name.rfind('/');
  const auto dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  return {name.substr(0, dot), LowerAscii(name.substr(dot + 1))};
}

const char* const kImageExtensions[] = {"jpg", "jpeg", "png", "webp", "ppm", "pgm", "bmp", "tif", "tiff", "gif"};

std::string ReadSmall(int fd, const TarMember& m, const std::string& shown, Status* st) {
  std::string s(std::min<uint64_t>(m.size, 1 << 20), '\0');
  *st = ReadExact(fd, s.data(), s.size(), m.offset, shown);
  return s;
}

std::string TrimText(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A label as written in a sample: an index, or a class name.
struct RawLabel {
  bool present = false;
  bool is_name = false;
  int64_t index = -1;
  std::string name;
};

RawLabel LabelFromText(const std::string& text) {
  RawLabel l;
  const std::string t = TrimText(text);
  if (t.empty()) return l;
  l.present = true;
  if (std::all_of(t.begin(), t.end(), ::isdigit) && t.size() < 10) l.index = std::stoll(t);
  else l.is_name = true, l.name = t;
  return l;
}

// Class list and label indices for labels given as indices or names: a
// fixed list when the options name one, else sorted names, else "0".."max".
Status ResolveLabels(const std::vector<RawLabel>& raw, const std::vector<std::string>& fixed, bool no_class,
                     std::vector<std::string>* classes, std::vector<int32_t>* labels, std::vector<std::string>* why) {
  labels->assign(raw.size(), -1);
  why->assign(raw.size(), "");
  if (no_class) return Status::Ok();
  *classes = fixed;
  if (classes->empty()) {
    std::set<std::string> names;
    int64_t max_index = -1;
    for (const auto& l : raw)
      if (l.is_name) names.insert(l.name);
      else if (l.present) max_index = std::max(max_index, l.index);
    if (!names.empty()) classes->assign(names.begin(), names.end());
    else
      for (int64_t i = 0; i <= std::min<int64_t>(max_index, 1 << 24); ++i) classes->push_back(std::to_string(i));
  }
  std::map<std::string, int32_t> index_of;
  for (size_t i = 0; i < classes->size(); ++i) index_of[(*classes)[i]] = static_cast<int32_t>(i);
  for (size_t i = 0; i < raw.size(); ++i) {
    const RawLabel& l = raw[i];
    if (!l.present) {
      (*why)[i] = "no label";
    } else if (l.is_name) {
      auto it = index_of.find(l.name);
      if (it == index_of.end()) (*why)[i] = "class '" + l.name + "' is not in the class list";
      else (*labels)[i] = it->second;
    } else if (l.index < 0 || l.index >= static_cast<int64_t>(classes->size())) {
      (*why)[i] = "label " + std::to_string(l.index) + " is not a class of the " + std::to_string(classes->size());
    } else {
      (*labels)[i] = static_cast<int32_t>(l.index);
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ShardList(const std::string& src) {
  std::error_code ec;
  if (fs::is_directory(src, ec)) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(src, ec))
      if (e.is_regular_file() && IsShardName(e.path().filename().string())) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    if (out.empty()) return Status::NotFound(src + " holds no .tar, .tar.gz or .tgz shards");
    return out;
  }
  auto list = ExpandBraces(src);
  if (!list.ok()) return list.status();
  for (const auto& p : *list)
    if (!fs::is_regular_file(p, ec)) return Status::NotFound("shard " + p + " does not exist");
  return list;
}

}  // namespace

bool LooksLikeWebDataset(const std::string& src) {
  std::error_code ec;
  if (src.find('{') != std::string::npos && src.find("..") != std::string::npos) return true;
  if (fs::is_regular_file(src, ec)) return IsShardName(src);
  if (!fs::is_directory(src, ec)) return false;
  bool shards = false;
  for (const auto& e : fs::directory_iterator(src, ec)) {
    if (e.is_directory()) return false;
    const std::string n = e.path().filename().string();
    if (HasImageExtension(n)) return false;
    shards = shards || IsShardName(n);
  }
  return shards;
}

Result<DatasetSource> OpenWebDatasetSource(const std::string& src, const SourceOptions& opts) {
  auto shards = ShardList(src);
  if (!shards.ok()) return shards.status();
  DatasetSource s;
  s.root = src;
  s.scratch = std::make_shared<ScratchFiles>();
  // Classes: the options', else classes.txt beside the shards (export_db writes it).
  std::vector<std::string> fixed;
  SourceOptions with_beside = opts;
  const fs::path shard_dir = fs::path(shards->front()).parent_path();
  const fs::path beside = shard_dir / "classes.txt";
  std::error_code ec;
  if (!opts.classes && opts.classes_file.empty() && fs::is_regular_file(beside, ec))
    with_beside.classes_file = beside.string();
  IMAGEPACK_RETURN_IF_ERROR(FixedClasses(with_beside, &fixed));
  DatasetMeta beside_meta;
  if (const fs::path mp = shard_dir / "meta.json"; fs::is_regular_file(mp, ec)) {
    auto bytes = ReadFile(mp.string());
    if (!bytes.ok()) return bytes.status();
    auto m = ParseMeta(bytes->data(), bytes->size());
    if (!m.ok()) return m.status().WithContext(mp.string());
    beside_meta = std::move(m.value());
  }
  std::vector<RawLabel> raw;
  // Per item: its field members (NAME -> member of KEY.NAME.EXT) and the
  // .json's other values, declared and filled once every shard is listed.
  struct Extra {
    std::string where;
    int archive = -1;
    std::map<std::string, std::pair<std::string, TarMember>> members;  // NAME -> (member name, member)
    nlohmann::json values = nlohmann::json::object();
  };
  std::vector<Extra> extras;
  std::set<std::string> seen;
  const std::string scratch_dir = opts.scratch_dir.empty() ? fs::temp_directory_path().string() : opts.scratch_dir;
  for (const std::string& shard : *shards) {
    std::string file = shard;
    if (IsGzipName(shard)) {
      file = (fs::path(scratch_dir) / (".imagepack-gunzip-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(s.scratch->paths.size()) + ".tar")).string();
      s.scratch->paths.push_back(file);
      IMAGEPACK_RETURN_IF_ERROR(Gunzip(shard, file));
    }
    auto members = ListTar(file, shard);
    if (!members.ok()) return members.status();
    const int archive = static_cast<int>(s.archives.size());
    s.archives.push_back(file);
    // Samples in the order their first member appears.
    std::vector<std::string> order;
    std::map<std::string, std::map<std::string, TarMember>> samples;
    for (const auto& m : members.value()) {
      auto [key, ext] = KeyAndExtension(m.name);
      if (ext.empty()) continue;
      auto [it, fresh] = samples.try_emplace(key);
      if (fresh) order.push_back(key);
      it->second[ext] = m;
    }
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError("cannot open " + shard);
    for (const std::string& key : order) {
      const auto& parts = samples[key];
      const std::string where = shard + ":" + key;
      const TarMember* image = nullptr;
      std::string image_ext;
      for (const char* e : kImageExtensions)
        if (auto it = parts.find(e); it != parts.end()) {
          image = &it->second;
          image_ext = e;
          break;
        }
      if (!image) {
        s.errors.push_back({where, "no image member (.jpg, .jpeg, .png, .webp, ...)"});
        continue;
      }
      SourceItem item;
      item.archive = archive;
      item.offset = image->offset;
      item.size = image->size;
      item.rel = key + "." + image_ext;
      Extra extra;
      extra.where = where;
      extra.archive = archive;
      for (const auto& [ext, m] : parts) {  // KEY.NAME.EXT with an image EXT: field NAME
        const auto dot = ext.rfind('.');
        if (dot == std::string::npos || dot == 0) continue;
        const std::string name = ext.substr(0, dot), e = ext.substr(dot + 1);
        if (std::find(std::begin(kImageExtensions), std::end(kImageExtensions), e) != std::end(kImageExtensions))
          extra.members[name] = {key + "." + ext, m};
      }
      RawLabel label;
      Status st;
      for (const char* e : {"cls", "cls.txt", "class", "label", "label.txt"})
        if (auto it = parts.find(e); it != parts.end()) {
          label = LabelFromText(ReadSmall(fd, it->second, shard, &st));
          break;
        }
      if (auto it = parts.find("json"); it != parts.end() && st.ok()) {
        auto j = nlohmann::json::parse(ReadSmall(fd, it->second, shard, &st), nullptr, false);
        if (j.is_object()) {
          if (j.contains("path") && j["path"].is_string() && !j["path"].get<std::string>().empty())
            item.rel = j["path"].get<std::string>();
          if (!label.present && j.contains("label")) {
            if (j["label"].is_number_integer()) label = {true, false, j["label"].get<int64_t>(), ""};
            else if (j["label"].is_string()) label = LabelFromText(j["label"].get<std::string>());
          }
          for (auto& [k, v] : j.items())
            if (k != "path" && k != "label" && k != "class" && !v.is_null()) extra.values[k] = v;
        }
      }
      if (!st.ok()) {
        ::close(fd);
        return st;
      }
      if (!seen.insert(item.rel).second) {
        s.errors.push_back({where, item.rel + " is in the shards twice"});
        continue;
      }
      s.items.push_back(std::move(item));
      raw.push_back(label);
      extras.push_back(std::move(extra));
    }
    ::close(fd);
  }
  // Fields: those of meta.json beside the shards (export_db writes the
  // database's metadata there: order, kinds, classes), then the others in
  // the order they first appear: members (a mask when NAME starts with
  // "mask", else an image), then the .json's other values (kinds as for
  // a manifest).
  std::map<std::string, int> slot_of;
  for (const FieldSpec& f : beside_meta.fields) {
    slot_of[f.name] = static_cast<int>(s.fields.size());
    s.fields.push_back(f);
  }
  for (const Extra& x : extras) {
    for (const auto& [name, m] : x.members)
      if (!slot_of.count(name)) {
        auto slot = Declare(s, name, name.rfind("mask", 0) == 0 ? FieldKind::kMask : FieldKind::kImage, opts);
        if (!slot.ok()) return slot.status();
        slot_of[name] = *slot;
      }
    for (auto& [k, v] : x.values.items())
      if (!slot_of.count(k)) {
        auto slot = Declare(s, k, KindOfValue(k, v), opts);
        if (!slot.ok()) return slot.status();
        slot_of[k] = *slot;
      }
  }
  std::vector<std::string> field_error(s.items.size());
  for (size_t i = 0; i < s.items.size() && !s.fields.empty(); ++i) {
    const Extra& x = extras[i];
    for (size_t slot = 0; slot < s.fields.size() && field_error[i].empty(); ++slot) {
      const FieldSpec& spec = s.fields[slot];
      SourceField f;
      f.slot = static_cast<int>(slot);
      if (auto it = x.members.find(spec.name); it != x.members.end() && InfoOf(spec.kind).spatial) {
        f.file = s.archives[size_t(x.archive)] + ":" + it->second.first;
        f.archive = x.archive;
        f.offset = it->second.second.offset;
        f.size = it->second.second.size;
      } else if (x.values.contains(spec.name)) {
        Status st = FillField(spec, x.values[spec.name], shard_dir, &f);
        if (!st.ok()) field_error[i] = st.message();
      } else if (InfoOf(spec.kind).spatial && spec.kind != FieldKind::kBoxes) {
        field_error[i] = "no " + spec.name + " member";
      }
      s.items[i].fields.push_back(std::move(f));
    }
  }
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabels(raw, fixed, opts.no_class, &s.classes, &labels, &why));
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (!field_error[i].empty()) {
      s.errors.push_back({extras[i].where, field_error[i]});
      continue;
    }
    if (!why[i].empty()) {
      s.errors.push_back({s.items[i].rel, why[i] + (why[i] == "no label" ? " (.cls member or .json \"label\")" : "")});
      continue;
    }
    s.items[i].label = labels[i];
    kept.push_back(std::move(s.items[i]));
  }
  s.items = std::move(kept);
  std::sort(s.items.begin(), s.items.end(), [](const SourceItem& a, const SourceItem& b) { return a.rel < b.rel; });
  IMAGEPACK_RETURN_IF_ERROR(OpenArchives(&s));
  return s;
}

// ---- pickled LMDB (folder2lmdb) -------------------------------------------

namespace {

// A value of the pickle subset we accept. Bytes are a range of the input.
struct PVal {
  enum Kind { kBytes, kStr, kInt, kNone, kBool, kSeq, kMark } kind = kNone;
  size_t off = 0, len = 0;  // kBytes
  std::string str;
  int64_t i = 0;
  std::vector<PVal> items;
};

// Runs the opcodes that build bytes, strings, integers, tuples and lists
// (protocols 3 to 5). Anything that names or calls code (GLOBAL, REDUCE,
// BUILD, ...) is refused: no pickle is executed.
Result<PVal> Unpickle(const uint8_t* p, size_t n) {
  std::vector<PVal> stack;
  std::map<uint64_t, PVal> memo;
  size_t at = 0;
  auto need = [&](size_t k) { return at + k <= n; };
  auto le = [&](size_t k) {
    uint64_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= uint64_t(p[at + b]) << (8 * b);
    at += k;
    return v;
  };
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("pickle: " + why + " at byte " + std::to_string(at)); };
  auto pop_to_mark = [&](std::vector<PVal>* out) -> bool {
    for (size_t k = stack.size(); k-- > 0;)
      if (stack[k].kind == PVal::kMark) {
        out->assign(std::make_move_iterator(stack.begin() + k + 1), std::make_move_iterator(stack.end()));
        stack.resize(k);
        return true;
      }
    return false;
  };
  while (at < n) {
    const uint8_t op = p[at++];
    switch (op) {
      case 0x80: if (!need(1)) return bad("truncated"); if (p[at] < 2) return bad("protocol below 2"); ++at; break;
      case 0x95: if (!need(8)) return bad("truncated"); at += 8; break;  // FRAME
      case 'C': case 'B': case 0x8e: case 0x96: {  // bytes, bytearray
        const size_t w = op == 'C' ? 1 : op == 'B' ? 4 : 8;
        if (!need(w)) return bad("truncated");
        const uint64_t len = le(w);
        if (len > n - at) return bad("bytes run past the end");
        PVal v;
        v.kind = PVal::kBytes;
        v.off = at;
        v.len = len;
        at += len;
        stack.push_back(std::move(v));
        break;
      }
      case 'X': case 0x8c: case 0x8d: {
        const size_t w = op == 0x8c ? 1 : op == 'X' ? 4 : 8;
        if (!need(w)) return bad("truncated");
        const uint64_t len = le(w);
        if (len > n - at) return bad("string runs past the end");
        PVal v;
        v.kind = PVal::kStr;
        v.str.assign(reinterpret_cast<const char*>(p + at), len);
        at += len;
        stack.push_back(std::move(v));
        break;
      }
      case 'K': case 'M': case 'J': {
        const size_t w = op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (!need(w)) return bad("truncated");
        PVal v;
        v.kind = PVal::kInt;
        const uint64_t u = le(w);
        v.i = op == 'J' ? static_cast<int32_t>(u) : static_cast<int64_t>(u);
        stack.push_back(std::move(v));
        break;
      }
      case 0x8a: {  // LONG1
        if (!need(1)) return bad("truncated");
        const size_t w = p[at++];
        if (w > 8 || !need(w)) return bad("integer wider than 64 bits");
        uint64_t u = w ? le(w) : 0;
        if (w > 0 && w < 8 && (u >> (8 * w - 1)) & 1) u |= ~uint64_t(0) << (8 * w);
        PVal v;
        v.kind = PVal::kInt;
        v.i = static_cast<int64_t>(u);
        stack.push_back(std::move(v));
        break;
      }
      case 'N': stack.push_back(PVal{}); break;
      case 0x88: case 0x89: { PVal v; v.kind = PVal::kBool; v.i = op == 0x88; stack.push_back(v); break; }
      case 0x94: if (stack.empty()) return bad("memo of nothing"); memo[memo.size()] = stack.back(); break;
      case 'q': case 'r': {
        const size_t w = op == 'q' ? 1 : 4;
        if (!need(w) || stack.empty()) return bad("truncated");
        memo[le(w)] = stack.back();
        break;
      }
      case 'h': case 'j': {
        const size_t w = op == 'h' ? 1 : 4;
        if (!need(w)) return bad("truncated");
        auto it = memo.find(le(w));
        if (it == memo.end()) return bad("memo entry not set");
        stack.push_back(it->second);
        break;
      }
      case ')': case ']': { PVal v; v.kind = PVal::kSeq; stack.push_back(v); break; }
      case 0x85: case 0x86: case 0x87: {
        const size_t k = op - 0x84;
        if (stack.size() < k) return bad("tuple of missing values");
        PVal v;
        v.kind = PVal::kSeq;
        v.items.assign(std::make_move_iterator(stack.end() - k), std::make_move_iterator(stack.end()));
        stack.resize(stack.size() - k);
        stack.push_back(std::move(v));
        break;
      }
      case '(': { PVal v; v.kind = PVal::kMark; stack.push_back(v); break; }
      case 't': case 'l': {
        PVal v;
        v.kind = PVal::kSeq;
        if (!pop_to_mark(&v.items)) return bad("no mark");
        stack.push_back(std::move(v));
        break;
      }
      case 'a': {
        if (stack.size() < 2 || stack[stack.size() - 2].kind != PVal::kSeq) return bad("append to a non-list");
        PVal x = std::move(stack.back());
        stack.pop_back();
        stack.back().items.push_back(std::move(x));
        break;
      }
      case 'e': {
        std::vector<PVal> xs;
        if (!pop_to_mark(&xs) || stack.empty() || stack.back().kind != PVal::kSeq) return bad("appends to a non-list");
        for (auto& x : xs) stack.back().items.push_back(std::move(x));
        break;
      }
      case '.':
        if (stack.size() != 1) return bad("stop with " + std::to_string(stack.size()) + " values");
        return std::move(stack.back());
      case 'c': case 0x93: case 'R': case 'b': case 0x81: case 0x92: case 'i': case 'o':
        return bad("refusing to call code (opcode 0x" + [](uint8_t o) {
          char b[3];
          std::snprintf(b, sizeof b, "%02x", o);
          return std::string(b);
        }(op) + "): only (image bytes, label) values are read; e.g. numpy labels must be plain ints");
      default: {
        char b[8];
        std::snprintf(b, sizeof b, "0x%02x", op);
        return bad(std::string("opcode ") + b + " is outside the accepted subset");
      }
    }
  }
  return bad("no STOP");
}

std::string KeyText(const MDB_val& k) {
  const auto* c = static_cast<const char*>(k.mv_data);
  std::string s(c, k.mv_size);
  if (std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x21 && ch < 0x7f && ch != '/'; }) && !s.empty())
    return s;
  static const char* hex = "0123456789abcdef";
  std::string h = "key-";
  for (unsigned char ch : s) h += hex[ch >> 4], h += hex[ch & 15];
  return h;
}

}  // namespace

bool LooksLikePickledLmdb(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) file = (fs::path(path) / "data.mdb").string();
  if (!fs::is_regular_file(file, ec)) return false;
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) != 0) return false;
  bool yes = false;
  mdb_env_set_maxreaders(env, 4);
  if (mdb_env_open(env, file.c_str(), MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644) == 0) {
    MDB_txn* txn = nullptr;
    MDB_dbi dbi;
    if (mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0 && mdb_dbi_open(txn, nullptr, 0, &dbi) == 0) {
      MDB_val k{std::strlen(kMetaKey), const_cast<char*>(kMetaKey)}, v;
      yes = mdb_get(txn, dbi, &k, &v) == MDB_NOTFOUND;  // an LMDB that is not ours
    }
    if (txn) mdb_txn_abort(txn);
  }
  mdb_env_close(env);
  return yes;
}

Result<DatasetSource> OpenPickledLmdbSource(const std::string& path, const SourceOptions& opts) {
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "data.mdb").string() : path;
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) != 0) return Status::IOError("mdb_env_create failed");
  std::unique_ptr<MDB_env, void (*)(MDB_env*)> env_guard(env, mdb_env_close);
  int rc = mdb_env_open(env, file.c_str(), MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644);
  if (rc != 0) return Status::IOError("cannot open LMDB " + path + ": " + mdb_strerror(rc));
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  if ((rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn)) != 0 || (rc = mdb_dbi_open(txn, nullptr, 0, &dbi)) != 0)
    return Status::IOError("cannot read LMDB " + path + ": " + mdb_strerror(rc));
  std::unique_ptr<MDB_txn, void (*)(MDB_txn*)> txn_guard(txn, mdb_txn_abort);
  auto value_of = [&](const std::string& key, MDB_val* v) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    return mdb_get(txn, dbi, &k, v) == 0;
  };
  // The record keys: __keys__ (a pickled list) in its order, else every key
  // but the bookkeeping ones in LMDB's (byte) order.
  std::vector<std::string> keys;
  MDB_val v;
  if (value_of("__keys__", &v)) {
    auto list = Unpickle(static_cast<const uint8_t*>(v.mv_data), v.mv_size);
    if (!list.ok()) return Status::InvalidArgument(path + ": __keys__: " + list.status().message());
    if (list->kind != PVal::kSeq) return Status::InvalidArgument(path + ": __keys__ is not a list");
    for (const auto& k : list->items) {
      if (k.kind == PVal::kBytes) keys.emplace_back(reinterpret_cast<const char*>(v.mv_data) + k.off, k.len);
      else if (k.kind == PVal::kStr) keys.push_back(k.str);
      else return Status::InvalidArgument(path + ": __keys__ holds a value that is not bytes or str");
    }
  } else {
    MDB_cursor* cur = nullptr;
    mdb_cursor_open(txn, dbi, &cur);
    MDB_val k;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
      if (key != "__keys__" && key != "__len__") keys.push_back(std::move(key));
    }
    mdb_cursor_close(cur);
  }
  if (value_of("__len__", &v)) {
    auto len = Unpickle(static_cast<const uint8_t*>(v.mv_data), v.mv_size);
    if (len.ok() && len->kind == PVal::kInt && len->i != static_cast<int64_t>(keys.size()))
      return Status::InvalidArgument(path + ": __len__ says " + std::to_string(len->i) + " records, __keys__ lists " +
                                     std::to_string(keys.size()));
  }
  // liblmdb maps the whole file from offset 0 (found from any value's
  // address): a value's file offset is its address minus the map's.
  const uint8_t* map = nullptr;
  if (!keys.empty()) {
    MDB_val k{keys[0].size(), const_cast<char*>(keys[0].data())};
    const void* begin = nullptr;
    size_t size = 0;
    if (mdb_get(txn, dbi, &k, &v) == 0 && FindMapping(v.mv_data, &begin, &size))
      map = static_cast<const uint8_t*>(begin);
    if (!map) return Status::IOError(path + ": cannot find liblmdb's map of the file");
  }
  DatasetSource s;
  s.root = path;
  s.archives.push_back(file);
  std::vector<RawLabel> raw;
  std::set<std::string> seen;
  for (const std::string& key : keys) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    const std::string shown = path + ":" + KeyText(k);
    if (!seen.insert(key).second) {
      s.errors.push_back({shown, "listed twice in __keys__"});
      continue;
    }
    if (mdb_get(txn, dbi, &k, &v) != 0) {
      s.errors.push_back({shown, "listed in __keys__ but not in the database"});
      continue;
    }
    const auto* data = static_cast<const uint8_t*>(v.mv_data);
    auto val = Unpickle(data, v.mv_size);
    if (!val.ok()) {
      s.errors.push_back({shown, val.status().message()});
      continue;
    }
    if (val->kind != PVal::kSeq || val->items.empty() || val->items.size() > 2 || val->items[0].kind != PVal::kBytes) {
      s.errors.push_back({shown, "value is not a pickled (image bytes, label)"});
      continue;
    }
    RawLabel label;
    if (val->items.size() == 2) {
      const PVal& l = val->items[1];
      if (l.kind == PVal::kInt) label = {true, false, l.i, ""};
      else if (l.kind == PVal::kStr) label = LabelFromText(l.str);
      else if (l.kind != PVal::kNone) {
        s.errors.push_back({shown, "label is not an int, a str or None"});
        continue;
      }
    }
    SourceItem item;
    item.rel = KeyText(k);
    item.archive = 0;
    item.offset = static_cast<uint64_t>(data - map) + val->items[0].off;
    item.size = val->items[0].len;
    s.items.push_back(std::move(item));
    raw.push_back(label);
  }
  std::vector<std::string> fixed;
  IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  const bool none_labelled = std::none_of(raw.begin(), raw.end(), [](const RawLabel& l) { return l.present; });
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabels(raw, fixed, opts.no_class || none_labelled, &s.classes, &labels, &why));
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (!why[i].empty()) {
      s.errors.push_back({path + ":" + s.items[i].rel, why[i]});
      continue;
    }
    s.items[i].label = labels[i];
    kept.push_back(std::move(s.items[i]));
  }
  s.items = std::move(kept);  // in __keys__ order: the order the user packed
  IMAGEPACK_RETURN_IF_ERROR(OpenArchives(&s));
  return s;
}

Status OpenArchives(DatasetSource* s) {
  if (!s->scratch) s->scratch = std::make_shared<ScratchFiles>();
  for (const auto& file : s->archives) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open " + file, errno);
    s->scratch->fds.push_back(fd);
  }
  return Status::Ok();
}

namespace {

// `size` bytes at `offset` of archive `archive`, after `headroom` free bytes.
Result<std::vector<uint8_t>> ReadArchiveRange(const DatasetSource& s, int archive, uint64_t offset, uint64_t size,
                                              size_t headroom, const std::string& shown) {
  std::vector<uint8_t> out(headroom + size);
  IMAGEPACK_RETURN_IF_ERROR(ReadExact(s.scratch->fds.at(size_t(archive)), out.data() + headroom, size, offset, shown));
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> ReadFieldFile(const DatasetSource& s, const SourceField& f) {
  if (f.archive < 0) return ReadFile(f.file);
  return ReadArchiveRange(s, f.archive, f.offset, f.size, 0, f.file);
}

Result<std::vector<uint8_t>> ReadArchiveItem(const DatasetSource& s, const SourceItem& item, size_t headroom) {
  return ReadArchiveRange(s, item.archive, item.offset, item.size, headroom, s.archives.at(size_t(item.archive)));
}

}  // namespace imagepack::internal
