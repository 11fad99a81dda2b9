package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/carriage/carriagetest"
	"github.com/agentproto/handoff/mcp"
	"github.com/agentproto/handoff/ref"
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

// The package travels beside the Handoff in params._meta, under a key of
// its own that follows MCP's rules for _meta keys (a prefix and one name).
func TestMCP_PackageBesideTheHandoff(t *testing.T) {
	h := &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte("a.b.c")}}
	meta := map[string]any{}
	require.NoError(t, mcp.AttachHandoff(meta, h))
	obj := ref.Object{Octets: []byte(`{"k":1}`)}
	mcp.AttachPackage(meta, obj)
	assert.Regexp(t, `^[a-z0-9.-]+/[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]$`, mcp.PackageKey)
	got, err := mcp.Package(meta)
	require.NoError(t, err)
	assert.Equal(t, obj.Octets, got.Octets)
	assert.Nil(t, got.Salt)
	octets, err := mcp.Handoff(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"offer":"a.b.c"}`, string(octets))
}
