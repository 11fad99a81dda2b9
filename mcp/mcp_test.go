package mcp_test

import (
	"testing"

	"github.com/agentproto/handoff/carriage/carriagetest"
	"github.com/agentproto/handoff/mcp"
)

var carrier = carriagetest.Carrier{
	Key:           mcp.MetaKey,
	AttachHandoff: mcp.AttachHandoff,
	Handoff:       mcp.Handoff,
	AttachStatus:  mcp.AttachStatus,
	Status:        mcp.Status,
}

// HC-67: an offer travels in tools/call params._meta, its status in the
// CallToolResult's _meta, and a "canceled" in notifications/cancelled
// params._meta, each through JSON, and each verifies on the other side.
func TestMCP_HC67_RoundTrip(t *testing.T) { carriagetest.RoundTrip(t, carrier) }

func TestMCP_Absent(t *testing.T) { carriagetest.Absent(t, carrier, mcp.MetaKey, mcp.ErrAbsent) }
