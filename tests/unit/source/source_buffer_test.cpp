#include "compiler/source/source_buffer.h"
#include "compiler/source/checked_math.h"

#include <gtest/gtest.h>

#include <vector>

namespace weft::source {
namespace {

TEST(SourceBufferTest, LineAndColumnAreOneBasedBytes) {
  SourceBuffer buffer("a.weft", "ab\ncd\r\n\nxyz");
  EXPECT_EQ(buffer.line_count(), 4u);
  auto lc = buffer.LineColOf(0);
  EXPECT_EQ(lc.line, 1u);
  EXPECT_EQ(lc.col, 1u);
  lc = buffer.LineColOf(4);  // 'd'
  EXPECT_EQ(lc.line, 2u);
  EXPECT_EQ(lc.col, 2u);
  lc = buffer.LineColOf(buffer.size());  // end of text
  EXPECT_EQ(lc.line, 4u);
  EXPECT_EQ(lc.col, 4u);
  EXPECT_EQ(buffer.LineText(2), "cd");  // without \r\n
  EXPECT_EQ(buffer.LineText(3), "");
  EXPECT_EQ(buffer.LineText(4), "xyz");
  EXPECT_EQ(buffer.LineText(5), "");
}

TEST(SourceBufferTest, LineColAgreesWithAScanInAnyQueryOrder) {
  const std::string text = "a\n\nbc\ndef\n\n\nghij";
  SourceBuffer buffer("a.weft", text);
  // Forward, backward and jumping queries exercise the lookup cache.
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i <= text.size(); ++i) order.push_back(i);
  for (uint32_t i = static_cast<uint32_t>(text.size()) + 1; i-- > 0;) order.push_back(i);
  for (uint32_t i = 0; i <= text.size(); i += 3) order.push_back(static_cast<uint32_t>(text.size()) - i);
  for (uint32_t offset : order) {
    uint32_t line = 1, col = 1;
    for (uint32_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    auto lc = buffer.LineColOf(offset);
    EXPECT_EQ(lc.line, line) << offset;
    EXPECT_EQ(lc.col, col) << offset;
  }
}

TEST(SourceBufferTest, RangeAtClampsToTheText) {
  SourceBuffer buffer("a.weft", "hello\nworld");
  SourceRange r = buffer.RangeAt(FileId{0}, 8, 100);
  EXPECT_EQ(r.offset, 8u);
  EXPECT_EQ(r.length, 3u);
  EXPECT_EQ(r.line, 2u);
  EXPECT_EQ(r.col, 3u);
  r = buffer.RangeAt(FileId{0}, 500, 2);
  EXPECT_EQ(r.offset, buffer.size());
  EXPECT_EQ(r.length, 0u);
}

TEST(SourceBufferTest, CoverSpansBothRanges) {
  SourceBuffer buffer("a.weft", "split \"x\" y dim 1");
  SourceRange a = buffer.RangeAt(FileId{0}, 0, 5);
  SourceRange b = buffer.RangeAt(FileId{0}, 12, 3);
  SourceRange c = Cover(a, b);
  EXPECT_EQ(c.offset, 0u);
  EXPECT_EQ(c.length, 15u);
  EXPECT_EQ(Cover(SourceRange{}, b).offset, 12u);
}

TEST(SourceBufferTest, JsonPointerAnnotationsFindTheEnclosingValue) {
  SourceBuffer buffer("a.json", R"({"a": "xyz"})");
  EXPECT_FALSE(buffer.JsonPointerAt(0).has_value());
  buffer.AnnotateJsonPointer(0, "/");
  buffer.AnnotateJsonPointer(6, "/a");
  EXPECT_EQ(*buffer.JsonPointerAt(0), "/");
  EXPECT_EQ(*buffer.JsonPointerAt(6), "/a");
  EXPECT_EQ(*buffer.JsonPointerAt(8), "/a");  // inside the string
}

TEST(SourceManagerTest, AssignsIdsAndKeepsBuffersInPlace) {
  SourceManager sources;
  FileId a = sources.Add(SourceBuffer("a.weft", "a"));
  const SourceBuffer* first = &sources.Get(a);
  FileId b = sources.Add(SourceBuffer("b.weft", "b"));
  EXPECT_NE(a, b);
  EXPECT_EQ(&sources.Get(a), first);
  EXPECT_EQ(sources.Get(b).filename(), "b.weft");
  EXPECT_EQ(sources.Get(b).id(), b);
  EXPECT_EQ(sources.Find(FileId{}), nullptr);
  EXPECT_EQ(sources.Find(FileId{7}), nullptr);
}

TEST(SourceBufferTest, FromFileReportsMissingFiles) {
  std::string error;
  EXPECT_FALSE(SourceBuffer::FromFile("/nonexistent/plan.weft", &error).has_value());
  EXPECT_NE(error.find("cannot open `/nonexistent/plan.weft`"), std::string::npos) << error;
}

TEST(SourceBufferTest, LeadingByteOrderMarkIsSkipped) {
  SourceBuffer bom("a.weft", "\xEF\xBB\xBFplan p\nfor M\n");
  EXPECT_TRUE(bom.had_byte_order_mark());
  EXPECT_EQ(bom.text(), "plan p\nfor M\n");
  EXPECT_EQ(bom.LineColOf(0).col, 1u);  // columns count from the first visible character
  EXPECT_EQ(bom.LineText(1), "plan p");
  SourceBuffer plain("a.weft", "plan p\n\xEF\xBB\xBF");
  EXPECT_FALSE(plain.had_byte_order_mark());
  EXPECT_EQ(plain.size(), 10u);  // one later in the text stays, for the lexer to report
  SourceBuffer partial("a.weft", "\xEF\xBB");
  EXPECT_FALSE(partial.had_byte_order_mark());
  EXPECT_EQ(partial.size(), 2u);
}

TEST(CheckedMathTest, NeverWraps) {
  EXPECT_EQ(CheckedMul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(CheckedMul(int64_t{1} << 62, 2));
  EXPECT_FALSE(CheckedAdd(int64_t{1} << 62, int64_t{1} << 62));
  EXPECT_FALSE(CheckedProduct({2147483648, 2147483648, 4}));
  EXPECT_EQ(SaturatingProduct({2147483648, 2147483648, 4}), kSaturated);
  EXPECT_EQ(SaturatingAdd(kSaturated, 1), kSaturated);
  EXPECT_EQ(SaturatingMul(kSaturated, 0), 0);
  EXPECT_EQ(SaturatingMul(3, 4), 12);
}

}  // namespace
}  // namespace weft::source
