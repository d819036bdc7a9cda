#include "imagepack/resize_tree.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "imagepack/files.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using namespace testing;  // testutil.h: TempDir, Slurp, Spit, Golden, Gradient, ...

// A small tree: 2 classes of generated JPEGs, the golden quirks, bad files
// and a non-image.
void MakeTree(const std::string& root, int per_class = 6) {
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < per_class; ++i) {
      auto jpeg = EncodeJpeg(Gradient(300 + 10 * i, 200 + 7 * c), 85);
      Spit(root + "/class" + std::to_string(c) + "/img" + std::to_string(i) + ".JPEG", jpeg.value());
    }
  for (const char* q : {"rgb.jpg", "progressive.jpg", "gray.jpg", "cmyk_adobe.jpg",
                        "png_named.JPEG", "rgba.png", "truncated.jpg", "empty.jpg", "garbage.jpg"})
    Spit(root + "/quirks/" + q, Golden(q));
  Spit(root + "/LICENSE.txt", {'x'});
}

ResizeTreeOptions Opts(const std::string& src, const std::string& dst) {
  ResizeTreeOptions o;
  o.src = src;
  o.dst = dst;
  o.prepare.decode.limit = {SizeLimit::Mode::kShorterEdge, 64};
  o.threads = 2;
  return o;
}

TEST(ResizeTree, MirrorsTreeAndReportsBadInputs) {
  TempDir src, dst;
  MakeTree(src.path());
  Progress progress;
  auto o = Opts(src.path(), dst.path());
  o.progress = &progress;
  auto r = ResizeTree(o);
  ASSERT_OK(r);
  EXPECT_EQ(r->files, 21);
  EXPECT_EQ(r->written, 18);
  ASSERT_EQ(r->errors.size(), 3u);
  EXPECT_EQ(r->errors[0].path, "quirks/empty.jpg");
  EXPECT_EQ(r->errors[1].path, "quirks/garbage.jpg");
  EXPECT_EQ(r->errors[2].path, "quirks/truncated.jpg");
  EXPECT_NE(r->errors[2].reason.find("truncated"), std::string::npos);
  EXPECT_EQ(r->ignored, (std::vector<std::string>{"LICENSE.txt"}));
  EXPECT_EQ(progress.done.load(), 21);
  EXPECT_EQ(progress.failed.load(), 3);
  // Small clean JPEGs (64x48 rgb, gray) are copied byte for byte.
  EXPECT_EQ(r->passed_through, 2);
  EXPECT_EQ(Slurp(dst / "quirks/rgb.jpg"), Golden("rgb.jpg"));
  // Every output is a JPEG whose shorter edge is 64 (or less, never upscaled).
  for (auto& e : fs::recursive_directory_iterator(dst.path())) {
    if (!e.is_regular_file()) continue;
    auto data = Slurp(e.path());
    auto info = ProbeImage(data.data(), data.size());
    ASSERT_OK(info);
    EXPECT_EQ(info->format, ImageFormat::kJpeg) << e.path();
    EXPECT_LE(std::min(info->width, info->height), 64) << e.path();
  }
  auto info = ProbeImage(Slurp(dst / "class1/img5.JPEG").data(),
                         Slurp(dst / "class1/img5.JPEG").size());
  EXPECT_EQ(info->height, 64);
  EXPECT_EQ(info->width, (350 * 64 * 2 + 207) / (207 * 2));
}

TEST(ResizeTree, RerunSkipsFinishedOutputsAndOverwriteRedoes) {
  TempDir src, dst;
  MakeTree(src.path(), 3);
  ASSERT_OK(ResizeTree(Opts(src.path(), dst.path())));
  fs::remove(dst / "class0/img1.JPEG");
  auto again = ResizeTree(Opts(src.path(), dst.path()));
  ASSERT_OK(again);
  EXPECT_EQ(again->written, 1);
  EXPECT_EQ(again->already_done, 11);
  EXPECT_EQ(again->errors.size(), 3u);  // bad inputs are retried, and fail again
  auto o = Opts(src.path(), dst.path());
  o.overwrite = true;
  auto over = ResizeTree(o);
  ASSERT_OK(over);
  EXPECT_EQ(over->written, 12);
  EXPECT_EQ(over->already_done, 0);
}

TEST(ResizeTree, ShardsAreDisjointAndCoverTheTree) {
  TempDir src, whole, sharded;
  MakeTree(src.path(), 10);
  ASSERT_OK(ResizeTree(Opts(src.path(), whole.path())));
  int64_t total_files = 0;
  for (int i = 0; i < 3; ++i) {
    auto o = Opts(src.path(), sharded.path());
    o.shard = {i, 3};
    auto r = ResizeTree(o);
    ASSERT_OK(r);
    EXPECT_EQ(r->already_done, 0) << "shards overlap";
    total_files += r->files;
  }
  EXPECT_EQ(total_files, 29);
  std::set<std::string> a, b;
  for (auto& e : fs::recursive_directory_iterator(whole.path()))
    if (e.is_regular_file()) a.insert(fs::relative(e.path(), whole.path()).string());
  for (auto& e : fs::recursive_directory_iterator(sharded.path()))
    if (e.is_regular_file()) b.insert(fs::relative(e.path(), sharded.path()).string());
  EXPECT_EQ(a, b);
  for (const auto& rel : a) EXPECT_EQ(Slurp(whole / rel), Slurp(sharded / rel)) << rel;
}

TEST(ResizeTree, CancelStopsEarlyWithOnlyCompleteFiles) {
  TempDir src, dst;
  MakeTree(src.path(), 20);
  CancelFlag cancel{true};
  auto o = Opts(src.path(), dst.path());
  o.cancel = &cancel;
  auto r = ResizeTree(o);
  ASSERT_OK(r);
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->written, 0);
}

TEST(ResizeTree, ResultDoesNotDependOnThreadCount) {
  TempDir src, one, two;
  MakeTree(src.path(), 5);
  auto o1 = Opts(src.path(), one.path());
  o1.threads = 1;
  auto o2 = Opts(src.path(), two.path());
  o2.threads = 4;
  ASSERT_OK(ResizeTree(o1));
  ASSERT_OK(ResizeTree(o2));
  for (auto& e : fs::recursive_directory_iterator(one.path())) {
    if (!e.is_regular_file()) continue;
    auto rel = fs::relative(e.path(), one.path()).string();
    EXPECT_EQ(Slurp(e.path()), Slurp(two / rel)) << rel;
  }
}

TEST(ResizeTree, DestinationInsideTheSourceIsRefused) {
  TempDir src;
  MakeTree(src.path(), 1);
  for (const std::string& dst : {src.path(), src / "out", src / "class0/deeper"}) {
    auto r = ResizeTree(Opts(src.path(), dst));
    ASSERT_FALSE(r.ok()) << dst;
    EXPECT_NE(r.status().message().find("inside it"), std::string::npos) << r.status().ToString();
  }
  TempDir elsewhere;
  EXPECT_OK(ResizeTree(Opts(src.path(), elsewhere / "out")));
  // A sibling whose name starts like the source is not inside it.
  EXPECT_OK(ResizeTree(Opts(src.path(), src.path() + "-resized")));
  std::filesystem::remove_all(src.path() + "-resized");
}

TEST(ResizeTree, MissingSourceIsFatalAndNamesIt) {
  TempDir dst;
  auto r = ResizeTree(Opts("/nonexistent/src", dst.path()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/src"), std::string::npos);
}

// Nothing to resize is a failure naming the source, and makes no DST.
TEST(ResizeTree, SourceWithoutImagesIsFatalAndMakesNothing) {
  TempDir src, out;
  Spit(src / "a/notes.txt", {'x'});
  auto r = ResizeTree(Opts(src.path(), out / "dst"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(src.path() + " holds no images (1 files ignored"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(out / "dst"));
}

}  // namespace
}  // namespace imagepack
