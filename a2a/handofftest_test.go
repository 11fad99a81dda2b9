package a2a_test

import (
	"testing"

	"github.com/agentproto/handoff/carriage/carriagetest"
)

// HC-66: every bad input of the handofftest kit, carried in Message.metadata
// (JSON, so COSE elements as base64url text), is refused by the delegate
// exactly as the kit says.
func TestA2A_HC66_BadInputsRefusedThroughMetadata(t *testing.T) { carriagetest.BadInputs(t, carrier) }
