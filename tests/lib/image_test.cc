#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "imagepack/transform.h"
#include "testutil.h"

namespace imagepack {
namespace {

using testing::Golden;
using testing::Gradient;
using testing::kQuads;
using testing::MeanAbsDiff;
using testing::Pixel;
using testing::WithExifOrientation;

Result<Image> Decode(const std::vector<uint8_t>& data, int channels = 3, SizeLimit limit = {}) {
  DecodeOptions o;
  o.channels = channels;
  o.limit = limit;
  return DecodeImage(data.data(), data.size(), o);
}

// Offset of the first 0xFF `marker` pair in a JPEG (as the golden files
// have them: no such pair inside their header segments).
size_t MarkerAt(const std::vector<uint8_t>& jpeg, uint8_t marker) {
  for (size_t i = 0; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == marker) return i;
  ADD_FAILURE() << "no marker 0xFF 0x" << std::hex << int(marker);
  return 0;
}

// Checks the golden picture: 4 flat quadrants (top-left red, top-right
// green, bottom-left blue, bottom-right white), sampled at their centres.
void ExpectQuadrants(const Image& img, int tol) {
  const int qx[2] = {img.width / 4, img.width * 3 / 4};
  const int qy[2] = {img.height / 4, img.height * 3 / 4};
  for (int q = 0; q < 4; ++q) {
    const uint8_t* p = Pixel(img, qx[q % 2], qy[q / 2]);
    for (int c = 0; c < img.channels; ++c)
      EXPECT_NEAR(p[c], kQuads[q][c], tol) << "quadrant " << q << " channel " << c;
  }
}

TEST(Probe, ReadsJpegHeader) {
  auto data = Golden("rgb.jpg");
  auto info = ProbeImage(data.data(), data.size());
  ASSERT_OK(info);
  EXPECT_EQ(info->format, ImageFormat::kJpeg);
  EXPECT_EQ(info->width, 64);
  EXPECT_EQ(info->height, 48);
  EXPECT_EQ(info->jpeg_color, JpegColor::kYCbCr);
  EXPECT_FALSE(info->progressive);
  EXPECT_TRUE(info->has_eoi);
  EXPECT_EQ(info->orientation, 1);
}

TEST(Probe, RecognisesQuirks) {
  auto prog = Golden("progressive.jpg");
  EXPECT_TRUE(ProbeImage(prog.data(), prog.size())->progressive);
  auto cmyk = Golden("cmyk_adobe.jpg");
  auto ci = ProbeImage(cmyk.data(), cmyk.size());
  ASSERT_OK(ci);
  EXPECT_EQ(ci->components, 4);
  EXPECT_TRUE(ci->adobe_marker);
  auto gray = Golden("gray.jpg");
  EXPECT_EQ(ProbeImage(gray.data(), gray.size())->jpeg_color, JpegColor::kGray);
  auto png = Golden("png_named.JPEG");
  auto pi = ProbeImage(png.data(), png.size());
  ASSERT_OK(pi);
  EXPECT_EQ(pi->format, ImageFormat::kPng);
  EXPECT_EQ(pi->width, 64);
  auto trunc = Golden("truncated.jpg");
  auto ti = ProbeImage(trunc.data(), trunc.size());
  ASSERT_OK(ti);  // the header is intact ...
  EXPECT_FALSE(ti->has_eoi);  // ... but the end is missing
}

TEST(Decode, EveryQuirkGivesTheSamePicture) {
  for (const char* name : {"rgb.jpg", "progressive.jpg", "cmyk_adobe.jpg", "png_named.JPEG"}) {
    SCOPED_TRACE(name);
    auto img = Decode(Golden(name));
    ASSERT_OK(img);
    EXPECT_EQ(img->width, 64);
    EXPECT_EQ(img->height, 48);
    EXPECT_EQ(img->channels, 3);
    ExpectQuadrants(img.value(), 12);
  }
}

TEST(Decode, GrayJpegExpandsToThreeEqualChannels) {
  auto img = Decode(Golden("gray.jpg"));
  ASSERT_OK(img);
  ASSERT_EQ(img->channels, 3);
  const uint8_t* p = Pixel(img.value(), 10, 10);
  EXPECT_EQ(p[0], p[1]);
  EXPECT_EQ(p[1], p[2]);
  // Rec. 601 luma of the red quadrant (220, 30, 30) is 87.
  EXPECT_NEAR(p[0], 87, 4);
}

TEST(Decode, OneChannelIsLuma) {
  for (const char* name : {"rgb.jpg", "cmyk_adobe.jpg", "png_named.JPEG"}) {
    SCOPED_TRACE(name);
    auto img = Decode(Golden(name), 1);
    ASSERT_OK(img);
    EXPECT_EQ(img->channels, 1);
    EXPECT_NEAR(Pixel(img.value(), 10, 10)[0], 87, 6);      // red
    EXPECT_NEAR(Pixel(img.value(), 50, 40)[0], 245, 6);     // white
  }
}

TEST(Decode, AlphaIsCompositedOverWhite) {
  auto img = Decode(Golden("rgba.png"));
  ASSERT_OK(img);
  ASSERT_EQ(img->channels, 3);
  const uint8_t* opaque = Pixel(img.value(), 10, 10);
  EXPECT_EQ(opaque[0], 220);
  EXPECT_EQ(opaque[1], 30);
  const uint8_t* clear = Pixel(img.value(), 10, 40);  // transparent blue -> white
  EXPECT_EQ(clear[0], 255);
  EXPECT_EQ(clear[1], 255);
  EXPECT_EQ(clear[2], 255);
}

TEST(Decode, AllEightExifOrientationsComeOutUpright) {
  // An upright 60x40 gradient, stored as each orientation would store it.
  Image upright = Gradient(60, 40);
  auto upright_jpeg = EncodeJpeg(upright, 98);
  ASSERT_OK(upright_jpeg);
  auto ref = Decode(upright_jpeg.value());
  ASSERT_OK(ref);
  // The stored pixels for orientation o are the inverse transform of upright.
  const int inverse[9] = {0, 1, 2, 3, 4, 5, 8, 7, 6};
  for (int o = 1; o <= 8; ++o) {
    for (bool be : {false, true}) {
      SCOPED_TRACE("orientation " + std::to_string(o) + (be ? " big-endian" : ""));
      Image stored = ApplyOrientation(upright, inverse[o]);
      auto jpeg = EncodeJpeg(stored, 98);
      ASSERT_OK(jpeg);
      auto tagged = WithExifOrientation(jpeg.value(), o, be);
      auto info = ProbeImage(tagged.data(), tagged.size());
      ASSERT_OK(info);
      EXPECT_EQ(info->orientation, o);
      auto img = Decode(tagged);
      ASSERT_OK(img);
      ASSERT_EQ(img->width, 60);
      ASSERT_EQ(img->height, 40);
      EXPECT_LT(MeanAbsDiff(img.value(), ref.value()), 3.0);
    }
  }
}

TEST(Decode, ExifOrientationAndResizeTogether) {
  Image upright = Gradient(300, 200);
  auto jpeg = EncodeJpeg(ApplyOrientation(upright, 8), 95);  // stored rotated
  ASSERT_OK(jpeg);
  auto img = Decode(WithExifOrientation(jpeg.value(), 6), 3,
                    {SizeLimit::Mode::kShorterEdge, 100});
  ASSERT_OK(img);
  EXPECT_EQ(img->width, 150);
  EXPECT_EQ(img->height, 100);
  EXPECT_LT(MeanAbsDiff(img.value(), ResampleImage(upright, 150, 100, ResampleFilter::kTriangle)),
            4.0);
}

TEST(Decode, HugeJpegIsDecodedAtReducedDctScale) {
  Image big = Gradient(4000, 3000);
  auto jpeg = EncodeJpeg(big, 80);
  ASSERT_OK(jpeg);
  auto img = Decode(jpeg.value(), 3, {SizeLimit::Mode::kShorterEdge, 256});
  ASSERT_OK(img);
  EXPECT_EQ(img->width, 341);
  EXPECT_EQ(img->height, 256);
  EXPECT_LT(MeanAbsDiff(img.value(), ResampleImage(big, 341, 256, ResampleFilter::kTriangle)), 3.0);
}

TEST(Decode, BrokenInputsAreErrorsThatSayWhy) {
  struct Case { const char* file; const char* words; };
  for (const Case& c : {Case{"truncated.jpg", "truncated JPEG"}, Case{"empty.jpg", "empty file"},
                        Case{"garbage.jpg", "not an image"}}) {
    SCOPED_TRACE(c.file);
    auto img = Decode(Golden(c.file));
    ASSERT_FALSE(img.ok());
    EXPECT_EQ(img.status().code(), Status::Code::kCorruption);
    EXPECT_NE(img.status().message().find(c.words), std::string::npos) << img.status().ToString();
  }
}

// Found by fuzz_verify: a JPEG without its quantisation tables used to
// decode with the tables of the image decoded before it on the same thread,
// so the result depended on history. It is an error, whatever came before,
// on every decode path (full, shrink-on-load, planar re-encode, region).
TEST(Decode, JpegMissingItsTablesFailsWhateverWasDecodedBefore) {
  const auto good = Golden("rgb.jpg");
  const auto bad = Golden("missing_dqt.jpg");
  for (int round = 0; round < 2; ++round) {
    ASSERT_OK(Decode(good));
    auto img = Decode(bad);
    ASSERT_FALSE(img.ok());
    EXPECT_NE(img.status().message().find("Quantization table"), std::string::npos) << img.status().ToString();
    PrepareOptions p;
    p.decode.limit = {SizeLimit::Mode::kShorterEdge, 6};
    ASSERT_OK(PrepareJpeg(good.data(), good.size(), p));
    EXPECT_FALSE(PrepareJpeg(bad.data(), bad.size(), p).ok());
  }
}

// Found by fuzz_decode: a scan whose data stops before the frame's last
// block, in a file that is otherwise complete (EOI present). libjpeg warns
// "premature end of data segment" and decodes the missing blocks flat, as
// Pillow, OpenCV and torchvision do. pack_lmdb passes such a file through
// (its structure is sound), so every decode path must take it too; a file
// that ends before its EOI stays "truncated JPEG" on all of them.
TEST(Decode, ScanEndingEarlyIsToleratedAFileEndingEarlyIsNot) {
  const auto good = Golden("rgb.jpg");
  const size_t sos = MarkerAt(good, 0xDA);
  const size_t scan = sos + 2 + ((size_t(good[sos + 2]) << 8) | good[sos + 3]);
  std::vector<uint8_t> short_scan(good.begin(), good.begin() + scan + (good.size() - 2 - scan) / 3);
  short_scan.insert(short_scan.end(), {0xFF, 0xD9});
  ASSERT_OK(CheckJpegStructure(short_scan.data(), short_scan.size()));

  PrepareOptions p;
  auto prepared = PrepareJpeg(short_scan.data(), short_scan.size(), p);
  ASSERT_OK(prepared);
  EXPECT_TRUE(prepared->passed_through);

  auto img = Decode(short_scan);
  ASSERT_OK(img);
  ASSERT_EQ(img->width, 64);
  ASSERT_EQ(img->height, 48);
  // The first third of the scan holds the top rows: red stays red.
  const uint8_t* tl = Pixel(img.value(), 16, 4);
  EXPECT_NEAR(tl[0], kQuads[0][0], 12);
  EXPECT_NEAR(tl[1], kQuads[0][1], 12);
  auto info = ProbeImage(short_scan.data(), short_scan.size());
  ASSERT_OK(info);
  std::vector<uint8_t> direct(64 * 48 * 3);
  EXPECT_OK(DecodeJpegInto(short_scan.data(), short_scan.size(), info.value(), DecodeOptions{}, direct.data()));
  PrepareOptions resize;
  resize.decode.limit = {SizeLimit::Mode::kShorterEdge, 24};
  auto smaller = PrepareJpeg(short_scan.data(), short_scan.size(), resize);
  ASSERT_OK(smaller);
  EXPECT_FALSE(smaller->passed_through);
  RenderOptions r;
  r.out_w = r.out_h = 16;
  Image out;
  EXPECT_OK(RenderJpeg(short_scan.data(), short_scan.size(), CropBox{0, 0, 64, 48}, r, &out));

  // Cut at the same place without an EOI: truncated, on every path.
  const std::vector<uint8_t> cut(short_scan.begin(), short_scan.end() - 2);
  auto cut_img = Decode(cut);
  ASSERT_FALSE(cut_img.ok());
  EXPECT_NE(cut_img.status().message().find("truncated JPEG"), std::string::npos) << cut_img.status().ToString();
  auto cut_info = ProbeImage(cut.data(), cut.size());
  ASSERT_OK(cut_info);
  Status into = DecodeJpegInto(cut.data(), cut.size(), cut_info.value(), DecodeOptions{}, direct.data());
  EXPECT_NE(into.message().find("truncated JPEG"), std::string::npos) << into.ToString();
  auto cut_prepared = PrepareJpeg(cut.data(), cut.size(), resize);
  ASSERT_FALSE(cut_prepared.ok());
  EXPECT_NE(cut_prepared.status().message().find("truncated JPEG"), std::string::npos)
      << cut_prepared.status().ToString();
  Status render = RenderJpeg(cut.data(), cut.size(), CropBox{0, 0, 64, 48}, r, &out);
  EXPECT_NE(render.message().find("truncated JPEG"), std::string::npos) << render.ToString();
  // One rule, one message: the TurboJPEG paths and the loader's libjpeg
  // region decoder say exactly the same (they once wrapped it twice).
  EXPECT_EQ(render.message(), cut_img.status().message());
  EXPECT_EQ(into.message(), cut_img.status().message());
  EXPECT_EQ(cut_prepared.status().message(), cut_img.status().message());
}

TEST(Prepare, PassThroughOnlyForStructurallySoundJpegs) {
  for (const char* ok : {"rgb.jpg", "gray.jpg"}) {
    auto d = Golden(ok);
    EXPECT_TRUE(CheckJpegStructure(d.data(), d.size()).ok()) << ok;
  }
  struct Case { std::vector<uint8_t> data; const char* words; };
  auto good = Golden("rgb.jpg");
  auto two_soi = good;  // found by fuzz_decode: a second SOI inside the file
  two_soi.insert(two_soi.begin() + 2, {0xFF, 0xD8});
  auto no_eoi = std::vector<uint8_t>(good.begin(), good.end() - 2);
  auto undefined_huffman = good;  // found by fuzz_decode: the scan asks for DC/AC table 2
  undefined_huffman[MarkerAt(good, 0xDA) + 6] = 0x22;
  auto odd_marker = good;  // found by fuzz_decode: libjpeg refuses markers it does not know
  odd_marker.insert(odd_marker.begin() + 2, {0xFF, 0x72, 0x00, 0x04, 0x00, 0x00});
  auto undefined_table = good;  // the first component asks for table 3
  undefined_table[MarkerAt(good, 0xC0) + 12] = 3;
  // Found by fuzz_decode: libjpeg refuses, when the scan starts, a table
  // whose codes do not fit their lengths, and a DC table with a symbol over
  // 15 ("Bogus Huffman table definition").
  const size_t dht = MarkerAt(good, 0xC4) + 4;  // Tc/Th, then 16 counts, then the symbols
  ASSERT_EQ(good[dht] >> 4, 0) << "the first Huffman table is not a DC table";
  auto codes_overflow = good;  // every code of the table at length 1
  int symbols = 0;
  for (int l = 1; l <= 16; ++l) symbols += std::exchange(codes_overflow[dht + l], 0);
  ASSERT_GE(symbols, 2);
  codes_overflow[dht + 1] = static_cast<uint8_t>(symbols);
  auto dc_symbol = good;
  dc_symbol[dht + 17 + symbols - 1] = 16;
  for (const Case& c : {Case{Golden("missing_dqt.jpg"), "between segments"}, Case{undefined_table, "not defined"},
                        Case{codes_overflow, "bogus Huffman table"}, Case{dc_symbol, "bogus Huffman table"},
                        Case{Golden("truncated.jpg"), "EOI"},
                        Case{two_soi, "second SOI"}, Case{odd_marker, "unsupported marker 0x72"},
                        Case{undefined_huffman, "Huffman table that is not defined"}, Case{no_eoi, "EOI"}}) {
    Status st = CheckJpegStructure(c.data.data(), c.data.size());
    ASSERT_FALSE(st.ok()) << c.words;
    EXPECT_NE(st.message().find(c.words), std::string::npos) << st.ToString();
    // Never passed through: re-encoded when it decodes, an error otherwise.
    PrepareOptions p;
    auto out = PrepareJpeg(c.data.data(), c.data.size(), p);
    if (out.ok()) {
      EXPECT_FALSE(out->passed_through);
      EXPECT_OK(DecodeImage(out->bytes.data(), out->bytes.size(), DecodeOptions{}));
    }
  }
}

TEST(Decode, JpegCutInsideTheHeaderIsAnError) {
  auto data = Golden("rgb.jpg");
  for (size_t n : {size_t(3), size_t(20), size_t(100)}) {
    std::vector<uint8_t> cut(data.begin(), data.begin() + n);
    auto img = Decode(cut);
    ASSERT_FALSE(img.ok()) << n;
    EXPECT_NE(img.status().message().find("JPEG"), std::string::npos) << img.status().ToString();
  }
}

TEST(Decode, PixelLimitIsCheckedBeforeDecoding) {
  // A header claiming 65000x65000: refused from the header alone.
  auto data = Golden("rgb.jpg");
  auto info = ProbeImage(data.data(), data.size());
  ASSERT_OK(info);
  const size_t sof = MarkerAt(data, 0xC0);
  data[sof + 5] = 0xFD; data[sof + 6] = 0xE8;  // height 65000
  data[sof + 7] = 0xFD; data[sof + 8] = 0xE8;  // width 65000
  DecodeOptions o;
  o.max_pixels = 100000000;
  auto img = DecodeImage(data.data(), data.size(), o);
  ASSERT_FALSE(img.ok());
  EXPECT_NE(img.status().message().find("65000x65000"), std::string::npos) << img.status().ToString();
  EXPECT_NE(img.status().message().find("--max-pixels"), std::string::npos);
  // pack_lmdb and resize_imagenet go through PrepareJpeg: refused there too,
  // with and without a size limit (the planar path used to skip the check).
  for (int n : {0, 256}) {
    PrepareOptions p;
    p.decode.max_pixels = 100000000;
    if (n) p.decode.limit = {SizeLimit::Mode::kShorterEdge, n};
    auto out = PrepareJpeg(data.data(), data.size(), p);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("--max-pixels"), std::string::npos) << out.status().ToString();
  }
}

TEST(Prepare, CleanJpegWithinLimitPassesThroughByteForByte) {
  auto data = Golden("rgb.jpg");
  PrepareOptions o;
  o.decode.limit = {SizeLimit::Mode::kShorterEdge, 256};
  auto p = PrepareJpeg(data.data(), data.size(), o);
  ASSERT_OK(p);
  EXPECT_TRUE(p->passed_through);
  EXPECT_EQ(p->bytes, data);
  o.reencode = true;
  auto r = PrepareJpeg(data.data(), data.size(), o);
  ASSERT_OK(r);
  EXPECT_FALSE(r->passed_through);
  EXPECT_NE(r->bytes, data);
  auto gray = Golden("gray.jpg");
  auto g = PrepareJpeg(gray.data(), gray.size(), PrepareOptions{});
  ASSERT_OK(g);
  EXPECT_TRUE(g->passed_through);
  EXPECT_EQ(g->channels, 1);
}

TEST(Prepare, QuirksAreReencodedAsPlainJpeg) {
  for (const char* name : {"progressive.jpg", "cmyk_adobe.jpg", "png_named.JPEG", "rgba.png"}) {
    SCOPED_TRACE(name);
    auto data = Golden(name);
    auto p = PrepareJpeg(data.data(), data.size(), PrepareOptions{});
    ASSERT_OK(p);
    EXPECT_FALSE(p->passed_through);
    auto info = ProbeImage(p->bytes.data(), p->bytes.size());
    ASSERT_OK(info);
    EXPECT_EQ(info->format, ImageFormat::kJpeg);
    EXPECT_EQ(info->jpeg_color, JpegColor::kYCbCr);
    EXPECT_FALSE(info->progressive);
    EXPECT_EQ(info->width, 64);
    EXPECT_EQ(info->height, 48);
  }
  // EXIF-rotated: re-encoded upright, the tag no longer applies.
  auto rotated = WithExifOrientation(Golden("rgb.jpg"), 6);
  auto p = PrepareJpeg(rotated.data(), rotated.size(), PrepareOptions{});
  ASSERT_OK(p);
  EXPECT_FALSE(p->passed_through);
  EXPECT_EQ(p->width, 48);
  EXPECT_EQ(p->height, 64);
}

TEST(Prepare, YuvFastPathMatchesTheRgbPath) {
  // A colourful image at odd sizes, 4:2:0 and 4:4:4 sources, with and
  // without EXIF rotation: the planar path must give what decoding to RGB,
  // resampling and re-encoding gives, up to rounding and JPEG loss.
  Image src = Gradient(517, 389);
  for (int y = 0; y < src.height; ++y)
    for (int x = 0; x < src.width; ++x)
      src.pixels[(size_t(y) * src.width + x) * 3 + 2] =
          static_cast<uint8_t>(128 + 100 * std::sin(x / 7.0) * std::cos(y / 5.0));
  auto jpeg = EncodeJpeg(src, 95);
  ASSERT_OK(jpeg);
  for (int orientation : {1, 6}) {
    SCOPED_TRACE(orientation);
    auto tagged = orientation == 1 ? jpeg.value() : WithExifOrientation(jpeg.value(), orientation);
    PrepareOptions o;
    o.decode.limit = {SizeLimit::Mode::kShorterEdge, 200};
    auto fast = PrepareJpeg(tagged.data(), tagged.size(), o);
    ASSERT_OK(fast);
    EXPECT_FALSE(fast->passed_through);
    auto fast_img = DecodeImage(fast->bytes.data(), fast->bytes.size(), DecodeOptions{});
    // The RGB path: decode, resample, encode at the same quality, decode.
    auto rgb = DecodeImage(tagged.data(), tagged.size(), o.decode);
    ASSERT_OK(rgb);
    auto rgb_jpeg = EncodeJpeg(rgb.value(), o.quality);
    ASSERT_OK(rgb_jpeg);
    auto ref = DecodeImage(rgb_jpeg->data(), rgb_jpeg->size(), DecodeOptions{});
    ASSERT_OK(fast_img);
    ASSERT_OK(ref);
    EXPECT_EQ(fast_img->width, ref->width);
    EXPECT_EQ(fast_img->height, ref->height);
    EXPECT_LT(MeanAbsDiff(fast_img.value(), ref.value()), 1.5);
  }
}

TEST(Prepare, OversizeJpegIsResized) {
  auto jpeg = EncodeJpeg(Gradient(500, 375), 90);
  ASSERT_OK(jpeg);
  PrepareOptions o;
  o.decode.limit = {SizeLimit::Mode::kShorterEdge, 256};
  auto p = PrepareJpeg(jpeg->data(), jpeg->size(), o);
  ASSERT_OK(p);
  EXPECT_FALSE(p->passed_through);
  EXPECT_EQ(p->width, 341);
  EXPECT_EQ(p->height, 256);
  auto info = ProbeImage(p->bytes.data(), p->bytes.size());
  ASSERT_OK(info);
  EXPECT_EQ(info->width, 341);
  EXPECT_EQ(info->height, 256);
}

}  // namespace
}  // namespace imagepack

namespace imagepack {
namespace {

// The SSSE3 paths of the channel conversions against the per-pixel rule,
// on every length around their 4- and 16-pixel steps.
TEST(Pixels, ChannelConversionsAndPlanesEqualThePerPixelRule) {
  for (int n = 0; n < 70; ++n) {
    std::vector<uint8_t> rgbx(size_t(n) * 4);
    for (size_t i = 0; i < rgbx.size(); ++i) rgbx[i] = uint8_t(i * 37 + 11);
    Image img{n, 1, 4, rgbx};
    Image rgb = ConvertChannels(img, 3);
    Image gray = ConvertChannels(img, 1);
    ASSERT_EQ(rgb.channels, 3);
    ASSERT_EQ(rgb.pixels.size(), size_t(n) * 3);
    ASSERT_EQ(gray.pixels.size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(rgb.pixels[size_t(i) * 3 + c], rgbx[size_t(i) * 4 + c]) << n << " " << i;
      ASSERT_EQ(gray.pixels[size_t(i)], Luma(rgbx[size_t(i) * 4], rgbx[size_t(i) * 4 + 1], rgbx[size_t(i) * 4 + 2]));
    }
    std::vector<uint8_t> r(static_cast<size_t>(n)), g(r), b(r);
    RgbToPlanes(rgb.pixels.data(), size_t(n), r.data(), g.data(), b.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(r[size_t(i)], rgb.pixels[size_t(i) * 3]);
      ASSERT_EQ(g[size_t(i)], rgb.pixels[size_t(i) * 3 + 1]);
      ASSERT_EQ(b[size_t(i)], rgb.pixels[size_t(i) * 3 + 2]);
    }
    Image back = ConvertChannels(gray, 3);
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(back.pixels[size_t(i) * 3 + c], gray.pixels[size_t(i)]);
  }
}

}  // namespace
}  // namespace imagepack
