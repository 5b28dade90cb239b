// Which job and task states are still active (work is left) and which are terminal: the
// engine's predicates of src/core/states.h, repeated for the UI. src/web/ui_states_test.cc
// reads these four lists and compares them with the engine's, so change both together.

export const ACTIVE_JOB_STATES: ReadonlySet<string> = new Set(["PENDING", "SCHEDULED", "RUNNING", "PAUSED"]);
export const TERMINAL_JOB_STATES: ReadonlySet<string> = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
export const ACTIVE_TASK_STATES: ReadonlySet<string> = new Set(["CREATED", "PENDING", "SCHEDULED", "RUNNING"]);
export const TERMINAL_TASK_STATES: ReadonlySet<string> = new Set(["COMPLETED", "FAILED", "CANCELLED", "SKIPPED"]);
