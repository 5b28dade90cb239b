// Turns a job file (YAML or JSON) into a checked Job, reporting every problem at once,
// each with its field path and line:column.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/document.h"
#include "core/job.h"

namespace baton {

// A loop's `max`, as a job file may ask (the engine's configuration may allow fewer).
inline constexpr int kMaxLoopIterations = 100'000;

struct JobParseResult {
  std::optional<Job> job;            // set only when there are no problems
  std::vector<Diagnostic> problems;  // in document order
  // The one problem is that the document expands to too many nodes or bytes.
  bool too_large = false;
  bool ok() const { return problems.empty(); }
  // All problems, one per line, each as Diagnostic::ToString() gives it.
  std::string Message() const;
};

// Parses and validates a job document; one expanding to more than `max_bytes` bytes of
// text (see ParseDocument) is refused, with too_large set. A loop's `max` over
// `max_loop_iterations` (the engine's coordinator.max_loop_iterations) is a problem.
JobParseResult ParseJob(std::string_view text, DocumentFormat format,
                        std::size_t max_bytes = kMaxDocumentBytes,
                        int max_loop_iterations = kMaxLoopIterations);

// Validates an already parsed document (e.g. the `subjob` of a task) as a job.
JobParseResult DecodeJob(const Node& root, int max_loop_iterations = kMaxLoopIterations);

// How strictly to decode. Stored rows and broker messages hold tasks whose templates
// were already evaluated: their values may legitimately contain "{{" or exceed a
// submission rule (a var over 64 characters after evaluation), so they are decoded with
// kStored, which checks only the shape (fields and types).
enum class DecodeMode { kSubmitted, kStored };

// Decodes one task from its JSON form (as ToJson(const Task&) writes it). Problems come
// back as one kInvalidArgument. JSON cannot expand beyond its own text, and these texts
// were written by the engine (the datastore bounds a stored job), so no byte limit here.
Result<Task> DecodeTaskJson(std::string_view json_text, DecodeMode mode = DecodeMode::kSubmitted);

// Decodes a job from its JSON form, e.g. a stored definition.
Result<Job> DecodeJobJson(std::string_view json_text, DecodeMode mode = DecodeMode::kSubmitted);

// Limits on job files (the spec's rules, collected for tests and docs).
inline constexpr int kMinRetryLimit = 1;
inline constexpr int kMaxRetryLimit = 10;
inline constexpr int kMaxPriority = 9;
inline constexpr int kMaxEachConcurrency = 99'999;
inline constexpr std::size_t kMaxVarLength = 64;
// At most this many problems are reported; a file with more is hopeless anyway.
inline constexpr std::size_t kMaxProblems = 100;

// Checks of a field's value that validation makes on literals, shared with the
// scheduler, which makes them again on the values templates evaluate to. Each returns
// the problem (without the field's path, and without quoting a value that came from a
// template) or nullopt.
std::optional<std::string> QueueProblem(std::string_view queue);
std::optional<std::string> VarProblem(std::string_view var);
// A name in `files`: written into the task's own directory, so no '/', not "." or "..",
// no NUL, and not the engine's own ".baton-" prefix.
inline constexpr std::string_view kReservedFilePrefix = ".baton-";
std::optional<std::string> FileNameProblem(std::string_view name);
// A key in `env`: no '=' and no NUL (the environment could not carry it).
std::optional<std::string> EnvNameProblem(std::string_view name);

}  // namespace baton
