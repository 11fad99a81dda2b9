// Package mcp carries handoff elements in MCP messages (draft section 6,
// HC-67). It works on the JSON _meta maps, so it needs no MCP SDK.
//
// The delegator puts the Handoff under MetaKey in the _meta of a
// tools/call request's params; the delegate's status goes under the same key
// in the CallToolResult's _meta; a "canceled" in the _meta of the params of
// notifications/cancelled. MCP asks the receiver of a cancellation not to
// reply, so a delegator that cancels over MCP may never see the last status:
// the hop is then unresolved, and it learns later statuses by retransmitting.
//
// # The handoff package beside the Handoff
//
// The draft carries the signed offer and its chain; it leaves the objects
// an offer names by digest to the host ("octets the delegate is expected
// to receive with the task", section 2.2). By this project's convention,
// not the draft's, the handoff package of package evidence (the object
// OfferParams.Deliver made, Outgoing.Delivered) travels in the same
// params._meta as the Handoff, under PackageKey: a JSON object whose
// "octets" are the package as sent and whose "salt", for a salted
// reference, is its salt, each as base64url text (AttachPackage,
// Package). It sits beside the Handoff, not in it: the Handoff stays the
// draft's object, bounded as the draft's receivers bound it before any
// signature is verified, and a delegate that takes no packages never
// reads one; the offer names the package by digest in its refs (HC-64)
// and never embeds it, and the salt never goes in the offer (HC-09). As
// text, the octets survive an SDK's re-serialization of _meta, so that
// the delegate checks exactly the octets the digest covers. The delegator
// sends it with the first call of the hop and with every retransmission
// (a retried call included), so that a delegate restarted in between can
// check it again against the same verified offer.
package mcp

import (
	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
	"github.com/agentproto/handoff/ref"
)

// MetaKey is the _meta key of the draft, exactly as draft-handoff-01
// section 6.2 ("Carrying the Element", MCP) spells it: a prefix on the
// draft's authors' domain, which follows MCP's rules for _meta key prefixes
// and is not one that MCP reserves. Every implementation of the draft uses
// this string.
const MetaKey = "quantumlearningmachines.com/agent-handoff"

// PackageKey is the _meta key of the handoff package that travels beside
// the Handoff: this project's convention, not the draft's carriage; the
// draft's key with "-package", a prefix and one name, as MCP's _meta keys
// are.
const PackageKey = MetaKey + "-package"

// ErrAbsent is returned when a message carries no handoff element.
var ErrAbsent = carriage.ErrAbsent

// AttachHandoff puts h in a request's params._meta.
func AttachHandoff(meta map[string]any, h *handoff.Handoff) error {
	return carriage.PutHandoff(meta, MetaKey, h)
}

// Handoff returns the Handoff octets a _meta map carries, for Agent.Receive.
func Handoff(meta map[string]any) ([]byte, error) { return carriage.Handoff(meta, MetaKey) }

// AttachPackage puts the object an offer names by digest (a handoff
// package and its salt) in a request's params._meta, under PackageKey.
func AttachPackage(meta map[string]any, obj ref.Object) { carriage.PutObject(meta, PackageKey, obj) }

// Package returns the object a _meta map carries under PackageKey:
// ErrAbsent when none, an error wrapping handoff.ErrMalformed when the
// value is not one.
func Package(meta map[string]any) (ref.Object, error) { return carriage.Object(meta, PackageKey) }

// AttachStatus puts a signed status in a result's (or a cancellation's)
// _meta.
func AttachStatus(meta map[string]any, s handoff.Signed) { carriage.PutStatus(meta, MetaKey, s) }

// Status returns the signed status octets a _meta map carries.
func Status(meta map[string]any) ([]byte, error) { return carriage.Status(meta, MetaKey) }
