package mcp_test

import (
	"testing"

	"github.com/agentproto/handoff/carriage/carriagetest"
)

// HC-67: every bad input of the handofftest kit, carried in tools/call params._meta
// (JSON, so COSE elements as base64url text), is refused by the delegate
// exactly as the kit says.
func TestMCP_HC67_BadInputsRefusedThroughMetadata(t *testing.T) { carriagetest.BadInputs(t, carrier) }
