package a2acore

import (
	"strings"

	carry "github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/state"
)

// The task states the core names, as A2A 1.0 spells them (TASK_STATE_*).
// The adapter of each SDK line maps them to its own spelling: a2a-go/v2
// uses these, a2a-go v0.3 the lower-case names of A2A 0.3 (V03).
const (
	Working       = "TASK_STATE_WORKING"
	InputRequired = "TASK_STATE_INPUT_REQUIRED"
	AuthRequired  = "TASK_STATE_AUTH_REQUIRED"
	Completed     = "TASK_STATE_COMPLETED"
	Failed        = "TASK_STATE_FAILED"
	Canceled      = "TASK_STATE_CANCELED"
	Rejected      = "TASK_STATE_REJECTED"
)

// TaskState returns the task state nearest a hop state (HC-29), or "" for
// "expired", which has none.
func TaskState(s state.State) string { return carry.TaskState(s) }

// V03 returns the A2A 0.3 spelling of a task state ("input-required"),
// and From03 the A2A 1.0 spelling of an A2A 0.3 one.
func V03(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-")
}

// From03 is the inverse of V03.
func From03(s string) string {
	if s == "" {
		return ""
	}
	return "TASK_STATE_" + strings.ReplaceAll(strings.ToUpper(s), "-", "_")
}

// Terminal reports whether a task in state s takes no more changes.
func Terminal(s string) bool {
	switch s {
	case Completed, Failed, Canceled, Rejected:
		return true
	}
	return false
}
