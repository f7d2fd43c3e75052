#include <gtest/gtest.h>
TEST(Placeholder, Mesh) {}
