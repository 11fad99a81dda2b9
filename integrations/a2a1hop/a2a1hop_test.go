package a2a1hop_test

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/integrations/a2a1hop"
)

// Declare lists the extension in capabilities.extensions with the
// required flag the server chooses, once.
func TestA2A1_Declare_AgentCard(t *testing.T) {
	card := &a2a.AgentCard{Name: "coder"}
	a2a1hop.Declare(card, true)
	a2a1hop.Declare(card, true)
	require.Len(t, card.Capabilities.Extensions, 1)
	require.Equal(t, a2a1hop.ExtensionURI, card.Capabilities.Extensions[0].URI)
	require.True(t, card.Capabilities.Extensions[0].Required)
	a2a1hop.Declare(card, false)
	require.Len(t, card.Capabilities.Extensions, 1)
	require.False(t, card.Capabilities.Extensions[0].Required)
}
