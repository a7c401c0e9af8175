// The one source of ringbench_test_pch, the target whose precompiled header (GoogleTest,
// nlohmann/json) every test binary reuses: CMake builds a precompiled header only for a target
// that compiles something.
