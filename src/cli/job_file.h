// Reading a job file from the command line: shared by `validate` and `submit`.
#pragma once

#include <string>

#include "core/document.h"

namespace baton::cli {

// Reads `file` ("-" is standard input) into `text`; on failure `error` says why.
bool ReadJobFile(const std::string& file, std::string& text, std::string& error);

// JSON for *.json, YAML for *.yaml / *.yml, otherwise guessed from the text.
DocumentFormat JobFileFormat(const std::string& file, const std::string& text);

}  // namespace baton::cli
