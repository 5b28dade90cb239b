#include "cli/job_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace baton::cli {

bool ReadJobFile(const std::string& file, std::string& text, std::string& error) {
  std::ostringstream buffer;
  if (file == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      error = std::strerror(errno);
      return false;
    }
    buffer << in.rdbuf();
    if (in.bad()) {
      error = "read error";
      return false;
    }
  }
  text = std::move(buffer).str();
  return true;
}

DocumentFormat JobFileFormat(const std::string& file, const std::string& text) {
  if (file.ends_with(".json")) return DocumentFormat::kJson;
  if (file.ends_with(".yaml") || file.ends_with(".yml")) return DocumentFormat::kYaml;
  return SniffFormat(text);
}

}  // namespace baton::cli
