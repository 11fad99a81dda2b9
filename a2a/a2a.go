// Package a2a carries handoff elements in A2A messages (draft section 6,
// HC-66). It works on the JSON metadata map and extensions list of an A2A
// Message, so it needs no A2A SDK.
//
// The delegator puts the Handoff in Message.metadata under ExtensionURI and
// lists the URI in Message.extensions (and in the A2A-Extensions service
// parameter of the request). A status goes under the same key in the
// metadata of the reply Message or of TaskStatus.message; a "canceled" in
// the metadata of the Cancel Task request.
package a2a

import (
	"slices"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/state"
)

// ExtensionURI is the A2A extension URI and metadata key of the draft,
// exactly as draft-handoff-01 section 6.1 ("Carrying the Element", A2A)
// spells it: the draft's authors chose it on their own domain, and the URI
// is an identifier only, never fetched. Every implementation of the draft
// uses this string; the draft says it would move to one the working group
// chooses if the work is taken up there.
const ExtensionURI = "https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1"

// ErrAbsent is returned when a message carries no handoff element.
var ErrAbsent = carriage.ErrAbsent

// AttachHandoff puts h in a message's metadata and lists ExtensionURI in
// its extensions, returning the new extensions list.
func AttachHandoff(metadata map[string]any, extensions []string, h *handoff.Handoff) ([]string, error) {
	if err := carriage.PutHandoff(metadata, ExtensionURI, h); err != nil {
		return extensions, err
	}
	if !slices.Contains(extensions, ExtensionURI) {
		extensions = append(extensions, ExtensionURI)
	}
	return extensions, nil
}

// Handoff returns the Handoff octets a message's metadata carries, for
// Agent.Receive.
func Handoff(metadata map[string]any) ([]byte, error) {
	return carriage.Handoff(metadata, ExtensionURI)
}

// AttachStatus puts a signed status in a reply's (or a Cancel Task
// request's) metadata.
func AttachStatus(metadata map[string]any, s handoff.Signed) {
	carriage.PutStatus(metadata, ExtensionURI, s)
}

// Status returns the signed status octets a metadata map carries, for
// Agent.HandleStatus.
func Status(metadata map[string]any) ([]byte, error) { return carriage.Status(metadata, ExtensionURI) }

// TaskState returns the nearest A2A TaskState for a hop state (HC-29, the
// draft's table "Mapping to A2A task states"), in the protocol buffer form
// ("TASK_STATE_WORKING"), or "" for Expired, which has none: the host
// protocol keeps its own task state.
func TaskState(s state.State) string {
	switch s {
	case state.Offered:
		return "TASK_STATE_SUBMITTED"
	case state.Accepted:
		return "TASK_STATE_WORKING"
	case state.Rejected:
		return "TASK_STATE_REJECTED"
	case state.Completed:
		return "TASK_STATE_COMPLETED"
	case state.Failed:
		return "TASK_STATE_FAILED"
	case state.Canceled:
		return "TASK_STATE_CANCELED"
	}
	return ""
}
