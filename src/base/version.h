// The version of this build, "x.y.z" (CMake's project version).
#pragma once

namespace baton {

const char* Version();

}  // namespace baton
