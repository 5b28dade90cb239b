#include "cli/validate.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/job_decode.h"

namespace baton::cli {
namespace {

DocumentFormat FormatOf(const std::string& file, const std::string& text) {
  auto ends_with = [&](std::string_view suffix) { return file.ends_with(suffix); };
  if (ends_with(".json")) return DocumentFormat::kJson;
  if (ends_with(".yaml") || ends_with(".yml")) return DocumentFormat::kYaml;
  return SniffFormat(text);
}

bool ReadAll(const std::string& file, std::string& text, std::string& error) {
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

}  // namespace

int Validate(const std::vector<std::string>& files, std::ostream& out, std::ostream& err) {
  int status = kExitOk;
  for (const std::string& file : files) {
    std::string text;
    std::string error;
    if (!ReadAll(file, text, error)) {
      err << fmt::format("{}: cannot read: {}\n", file, error);
      status = kExitUsage;
      continue;
    }
    JobParseResult result = ParseJob(text, FormatOf(file, text));
    if (result.ok()) {
      out << fmt::format("{}: ok\n", file);
      continue;
    }
    for (const Diagnostic& d : result.problems) err << file << ':' << d.ToString() << '\n';
    if (status == kExitOk) status = kExitFailure;
  }
  return status;
}

}  // namespace baton::cli
