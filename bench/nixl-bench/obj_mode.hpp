#pragma once
// nixl-bench --backend OBJ: DRAM <-> objects of an S3 store (s3rver started for the run unless
// --backend_params endpoint_override=... names one), with the same objects PUT and GET by the
// curl tool against the same server in the same run as the baseline.

#include "options.hpp"

namespace nixl_bench {

/// Runs the OBJ sweep and prints its table; returns the exit status.
int run_obj(const options& o);

}  // namespace nixl_bench
