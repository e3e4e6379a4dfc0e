#define CATCH_CONFIG_MAIN
#include "nixl_test/catch.hpp"
