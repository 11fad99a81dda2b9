// Package a2a carries handoff elements in A2A messages (draft section 6,
// HC-66). It works on the JSON metadata map and extensions list of an A2A
// Message, so it needs no A2A SDK.
//
// The delegator puts the Handoff in Message.metadata under ExtensionURI and
// lists the URI in Message.extensions (and in the A2A-Extensions service
// parameter of the request). A status goes under the same key in the
// metadata of the reply Message or of TaskStatus.message; a "canceled" in
// the metadata of the Cancel Task request.
//
// # The handoff package beside the Handoff
//
// The draft carries the signed offer and its chain; it leaves the objects
// an offer names by digest to the host ("octets the delegate is expected
// to receive with the task", section 2.2). By this project's convention,
// not the draft's, the handoff package of package evidence (the object
// OfferParams.Deliver made, Outgoing.Delivered) travels in the same
// Message.metadata as the Handoff, under PackageKey: a JSON object whose
// "octets" are the package as sent and whose "salt", for a salted
// reference, is its salt, each as base64url text (AttachPackage,
// Package). It sits beside the Handoff, not in it: the Handoff stays the
// draft's object, bounded as the draft's receivers bound it before any
// signature is verified, and a delegate that takes no packages never
// reads one; the offer names the package by digest in its refs (HC-64)
// and never embeds it, and the salt never goes in the offer (HC-09). As
// text, the octets survive an SDK's re-serialization of the metadata, so
// that the delegate checks exactly the octets the digest covers. The
// delegator sends it with the first message of the hop and with every
// retransmission, so that a delegate restarted in between can check it
// again against the same verified offer.
package a2a

import (
	"slices"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// ExtensionURI is the A2A extension URI and metadata key of the draft,
// exactly as draft-handoff-01 section 6.1 ("Carrying the Element", A2A)
// spells it: the draft's authors chose it on their own domain, and the URI
// is an identifier only, never fetched. Every implementation of the draft
// uses this string; the draft says it would move to one the working group
// chooses if the work is taken up there.
const ExtensionURI = "https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1"

// PackageKey is the Message.metadata key of the handoff package that
// travels beside the Handoff: this project's convention, under the
// extension's URI, not the draft's carriage.
const PackageKey = ExtensionURI + "/package"

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

// AttachPackage puts the object an offer names by digest (a handoff
// package and its salt) in a message's metadata, under PackageKey.
func AttachPackage(metadata map[string]any, obj ref.Object) {
	carriage.PutObject(metadata, PackageKey, obj)
}

// Package returns the object a message's metadata carries under
// PackageKey: ErrAbsent when none, an error wrapping handoff.ErrMalformed
// when the value is not one.
func Package(metadata map[string]any) (ref.Object, error) {
	return carriage.Object(metadata, PackageKey)
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
