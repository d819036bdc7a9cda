// bench_jpeg_ceiling DIR [--max-size N] [--quality Q]
// The ceiling for resize_imagenet: per image, one libjpeg-turbo decode at the
// best DCT scale for the target plus one encode of a target-sized image, with
// no resampling and no file I/O (files are read into memory first). Runs on
// one core; prints images/s. With --yuv, the decode and encode are planar
// (no colour conversion), the stricter ceiling for imagepack's planar path.
// See docs/BENCHMARKS.md.
#include <turbojpeg.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "imagepack/files.h"
#include "imagepack/image.h"

using namespace imagepack;
namespace po = boost::program_options;

int main(int argc, char** argv) {
  std::string dir;
  int max_size = 256, quality = 90, repeat = 1;
  po::options_description opts("Options");
  opts.add_options()("max-size", po::value(&max_size)->default_value(256), "shorter edge target")(
      "quality", po::value(&quality)->default_value(90), "JPEG quality")(
      "repeat", po::value(&repeat)->default_value(1), "passes over the files")(
      "yuv", "decode to and encode from Y/Cb/Cr planes")(
      "decode-only", "full-size RGB decodes only (the loader's ceiling)");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("dir", po::value(&dir));
  po::positional_options_description pos;
  pos.add("dir", 1);
  auto vm = cli::ParseOrExit(argc, argv, "DIR [options]", opts, hidden, pos);
  const bool yuv = vm.count("yuv") > 0;
  const bool decode_only = vm.count("decode-only") > 0;
  if (dir.empty()) return cli::UsageError("DIR is required");

  auto listing = ListTree(dir);
  if (!listing.ok()) {
    std::fprintf(stderr, "%s: %s\n", cli::ProgramName().c_str(), listing.status().message().c_str());
    return cli::kExitFatal;
  }
  std::vector<std::vector<uint8_t>> files;
  for (const auto& rel : listing->images) {
    auto data = ReadFile(dir + "/" + rel);
    if (data.ok()) files.push_back(std::move(data.value()));
  }
  tjhandle dec = tjInitDecompress(), enc = tjInitCompress();
  int nsf = 0;
  const tjscalingfactor* sf = tjGetScalingFactors(&nsf);
  std::vector<uint8_t> pix, out(tjBufSize(8192, 8192, TJSAMP_420));
  int64_t done = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeat; ++r) {
    for (const auto& f : files) {
      int w, h, ss, cs;
      if (tjDecompressHeader3(dec, f.data(), f.size(), &w, &h, &ss, &cs) != 0) continue;
      if (decode_only) {
        pix.resize(size_t(w) * h * 3);
        tjDecompress2(dec, f.data(), f.size(), pix.data(), w, 0, h, TJPF_RGB, TJFLAG_FASTDCT);
        ++done;
        continue;
      }
      auto [tw, th] = TargetSize(w, h, {SizeLimit::Mode::kShorterEdge, max_size});
      tjscalingfactor best{1, 1};
      for (int i = 0; i < nsf; ++i) {
        if (sf[i].num > sf[i].denom) continue;
        if (TJSCALED(w, sf[i]) >= tw && TJSCALED(h, sf[i]) >= th &&
            TJSCALED(w, sf[i]) < TJSCALED(w, best))
          best = sf[i];
      }
      const int dw = TJSCALED(w, best), dh = TJSCALED(h, best);
      unsigned char* buf = out.data();
      unsigned long len = out.size();
      if (yuv && ss >= 0 && cs == TJCS_YCbCr) {
        unsigned char* planes[3];
        int strides[3];
        pix.resize(tjBufSizeYUV2(dw, 1, dh, ss));
        unsigned char* p = pix.data();
        for (int i = 0; i < 3; ++i) {
          planes[i] = p;
          strides[i] = tjPlaneWidth(i, dw, ss);
          p += size_t(strides[i]) * tjPlaneHeight(i, dh, ss);
        }
        tjDecompressToYUVPlanes(dec, f.data(), f.size(), planes, dw, strides, dh, TJFLAG_FASTDCT);
        // Encode a target-sized window of the planes (same subsampling).
        tjCompressFromYUVPlanes(enc, const_cast<const unsigned char**>(planes), tw, strides, th,
                                ss, &buf, &len, quality, TJFLAG_NOREALLOC);
        ++done;
        continue;
      }
      pix.resize(size_t(dw) * dh * 3);
      tjDecompress2(dec, f.data(), f.size(), pix.data(), dw, 0, dh, TJPF_RGB, TJFLAG_FASTDCT);
      // Encode a target-sized window of the decoded pixels (pitch = dw * 3).
      tjCompress2(enc, pix.data(), tw, dw * 3, th, TJPF_RGB, &buf, &len, TJSAMP_420, quality,
                  TJFLAG_NOREALLOC);
      ++done;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("bench_jpeg_ceiling%s: %lld images in %.2f s on one core: %.1f images/s\n",
              yuv ? " --yuv" : decode_only ? " --decode-only" : "", static_cast<long long>(done), secs, done / secs);
  tjDestroy(dec);
  tjDestroy(enc);
  return 0;
}
