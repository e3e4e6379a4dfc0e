#pragma once
// One include for tests over Catch2 v2 (Debian 12) and v3 (newer systems).
#if defined(NIXL_CATCH3)
#include <catch2/catch_all.hpp>
/// Ends the test case as skipped, with a reason.
#define NIXL_SKIP(reason) SKIP(reason)
#else
#include <catch2/catch.hpp>
/// Ends the test case early, printing why (Catch2 v2 has no skip state).
#define NIXL_SKIP(reason)        \
  do {                           \
    WARN("SKIPPED: " << reason); \
    return;                      \
  } while (0)
#endif
