// Package mcp carries handoff elements in MCP messages (draft section 6,
// HC-67). It works on the JSON _meta maps, so it needs no MCP SDK.
//
// The delegator puts the Handoff under MetaKey in the _meta of a
// tools/call request's params; the delegate's status goes under the same key
// in the CallToolResult's _meta; a "canceled" in the _meta of the params of
// notifications/cancelled. MCP asks the receiver of a cancellation not to
// reply, so a delegator that cancels over MCP may never see the last status:
// the hop is then unresolved, and it learns later statuses by retransmitting.
package mcp

import (
	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/carriage"
)

// MetaKey is the _meta key of the draft, exactly as draft-handoff-01
// section 6.2 ("Carrying the Element", MCP) spells it: a prefix on the
// draft's authors' domain, which follows MCP's rules for _meta key prefixes
// and is not one that MCP reserves. Every implementation of the draft uses
// this string.
const MetaKey = "quantumlearningmachines.com/agent-handoff"

// ErrAbsent is returned when a message carries no handoff element.
var ErrAbsent = carriage.ErrAbsent

// AttachHandoff puts h in a request's params._meta.
func AttachHandoff(meta map[string]any, h *handoff.Handoff) error {
	return carriage.PutHandoff(meta, MetaKey, h)
}

// Handoff returns the Handoff octets a _meta map carries, for Agent.Receive.
func Handoff(meta map[string]any) ([]byte, error) { return carriage.Handoff(meta, MetaKey) }

// AttachStatus puts a signed status in a result's (or a cancellation's)
// _meta.
func AttachStatus(meta map[string]any, s handoff.Signed) { carriage.PutStatus(meta, MetaKey, s) }

// Status returns the signed status octets a _meta map carries.
func Status(meta map[string]any) ([]byte, error) { return carriage.Status(meta, MetaKey) }
