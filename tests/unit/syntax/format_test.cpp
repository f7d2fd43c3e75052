#include <gtest/gtest.h>

#include "tests/unit/syntax/syntax_test_util.h"

namespace weft::syntax {
namespace {

TEST(FormatTest, CanonicalizesLayout) {
  auto out = ParseText("p.weft", R"(   plan p   for M
tensor_parallel{colwise "a"   rowwise "b" packed [ 1,2, ]}
context_parallel {
split "" { x dim 1 rank 3 long_name dim 0 }
  gather "o" { output 0 dim 1 }
  split "s" x rank 2 dim 1
}
)");
  ASSERT_TRUE(out->plan) << out->diagnostics;
  EXPECT_EQ(out->diagnostics, "");
  EXPECT_EQ(PrintDsl(*out->plan), R"(plan p for M

context_parallel {
  split "" {
    x          dim 1 rank 3
    long_name  dim 0
  }
  gather "o" output 0 dim 1
  split "s" x dim 1 rank 2
}

tensor_parallel {
  colwise "a"
  rowwise "b" packed [1, 2]
}
)");
}

TEST(FormatTest, KeepsCommentsInPlace) {
  const std::string text = R"(# one
# two
plan p for M  # header

# section
context_parallel {  # brace
  # rule
  gather "o" output 0 dim 1  # trailing
  split "" {
    # item
    x  dim 1  # item trailing
    # end of rule
  }
  # end of section
}

# end of file
)";
  auto out = ParseText("p.weft", text);
  ASSERT_TRUE(out->plan) << out->diagnostics;
  EXPECT_EQ(PrintDsl(*out->plan), text);
  auto json = ParseText("p.json", PrintJson(*out->plan));
  ASSERT_TRUE(json->plan) << json->diagnostics;
  EXPECT_EQ(PrintDsl(*json->plan), text);
}

TEST(FormatTest, JsonKeepsScalarObjectsOnOneLine) {
  auto out = ParseText("p.weft", "plan p for M\ntensor_parallel {\n  colwise \"a\" packed [x, 2]\n}\n");
  ASSERT_TRUE(out->plan);
  EXPECT_EQ(PrintJson(*out->plan), R"({
  "weft_plan": 1,
  "name": "p",
  "model": "M",
  "tensor_parallel": {
    "rules": [
      {"colwise": "a", "packed": ["x", 2]}
    ]
  }
}
)");
}

TEST(FormatTest, DumpMarksErrorsAndLocations) {
  auto out = ParseText("p.weft", "plan p for M\ntensor_parallel {\n  colwise \"a..b\"\n}\n");
  ASSERT_TRUE(out->plan);
  EXPECT_EQ(Dump(*out->plan), "plan p for M @1:1 <error>\ntensor_parallel @2:1\n  colwise \"\" @3:3 <error>\n");
  DumpOptions options;
  options.locations = false;
  EXPECT_EQ(Dump(*out->plan, options), "plan p for M <error>\ntensor_parallel\n  colwise \"\" <error>\n");
}

}  // namespace
}  // namespace weft::syntax
