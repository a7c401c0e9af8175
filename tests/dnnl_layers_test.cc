#include <gtest/gtest.h>
TEST(Placeholder_dnnl_layers_test, Pending) { GTEST_SKIP() << "not written yet"; }
