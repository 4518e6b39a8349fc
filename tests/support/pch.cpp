// The translation unit that builds the test executables' precompiled header
// (tests/CMakeLists.txt, sanpath_test_pch); it defines nothing.
