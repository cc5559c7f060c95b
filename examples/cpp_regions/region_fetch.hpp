// Fetching a plan's region packages through the kcache C++ client.
//
// Contract: fetch_packages() asks the client (node tier, then server; every
// bundle verified: trailer, its own key, a trusted signature when trust is
// configured) for every region of the plan, checks that each bundle is an
// AOTInductor region for the plan's region field, and writes each package
// to `workdir`. Nothing is loaded here, so a refused bundle never reaches
// libtorch. Missing regions are one error naming all of them and the
// command that prewarms them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "client/client.hpp"
#include "common/result.hpp"
#include "plan.hpp"

namespace kcache::regions {

struct FetchedPackage {
  std::string path;                        // the .pt2 file under workdir
  std::vector<std::string> constant_fqns;  // what the loader must bind
  double compile_seconds = 0;              // what the producer spent
};

Result<std::map<std::string, FetchedPackage>> fetch_packages(Client& client, const Plan& plan,
                                                             const std::string& workdir);

}  // namespace kcache::regions
