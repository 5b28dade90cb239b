#include "base/version.h"

namespace baton {

const char* Version() { return BATON_VERSION_STRING; }

}  // namespace baton
