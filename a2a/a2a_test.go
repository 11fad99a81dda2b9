package a2a_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/a2a"
	"github.com/agentproto/handoff/carriage/carriagetest"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

var carrier = carriagetest.Carrier{
	Key: a2a.ExtensionURI,
	AttachHandoff: func(meta map[string]any, h *handoff.Handoff) error {
		_, err := a2a.AttachHandoff(meta, nil, h)
		return err
	},
	Handoff:      a2a.Handoff,
	AttachStatus: a2a.AttachStatus,
	Status:       a2a.Status,
}

// HC-66: an offer travels in Message.metadata, its status in the reply's
// metadata, and a "canceled" in a Cancel Task request's metadata, each
// through JSON, and each verifies on the other side.
func TestA2A_HC66_RoundTrip(t *testing.T) { carriagetest.RoundTrip(t, carrier) }

// HC-66: the extension URI is listed in Message.extensions, once.
func TestA2A_HC66_Extensions(t *testing.T) {
	h := &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte("a.b.c")}}
	meta := map[string]any{}
	ext, err := a2a.AttachHandoff(meta, []string{"https://other.example/ext"}, h)
	require.NoError(t, err)
	ext, err = a2a.AttachHandoff(meta, ext, h)
	require.NoError(t, err)
	assert.Equal(t, []string{"https://other.example/ext", a2a.ExtensionURI}, ext)
	assert.Contains(t, meta, a2a.ExtensionURI)
}

func TestA2A_Absent(t *testing.T) { carriagetest.Absent(t, carrier, a2a.ExtensionURI, a2a.ErrAbsent) }

func TestTaskState_HC29_A2AMapping(t *testing.T) {
	want := map[state.State]string{
		state.Offered: "TASK_STATE_SUBMITTED", state.Accepted: "TASK_STATE_WORKING", state.Rejected: "TASK_STATE_REJECTED",
		state.Completed: "TASK_STATE_COMPLETED", state.Failed: "TASK_STATE_FAILED", state.Canceled: "TASK_STATE_CANCELED", state.Expired: "",
	}
	for s, ts := range want {
		if got := a2a.TaskState(s); got != ts {
			t.Errorf("TaskState(%q) = %q, want %q", s, got, ts)
		}
	}
}

// The package travels beside the Handoff, under a key of its own: the
// Handoff under the extension URI is untouched, and the package comes back
// as the same octets and salt.
func TestA2A_PackageBesideTheHandoff(t *testing.T) {
	h := &handoff.Handoff{Offer: handoff.Signed{Format: handoff.JWS, Octets: []byte("a.b.c")}}
	meta := map[string]any{}
	_, err := a2a.AttachHandoff(meta, nil, h)
	require.NoError(t, err)
	obj := ref.Object{Octets: []byte(`{"k":1}`), Salt: []byte("0123456789abcdef")}
	a2a.AttachPackage(meta, obj)
	assert.NotEqual(t, a2a.ExtensionURI, a2a.PackageKey)
	got, err := a2a.Package(meta)
	require.NoError(t, err)
	assert.Equal(t, obj, got)
	octets, err := a2a.Handoff(meta)
	require.NoError(t, err)
	assert.JSONEq(t, `{"offer":"a.b.c"}`, string(octets))
	_, err = a2a.Package(map[string]any{})
	assert.ErrorIs(t, err, a2a.ErrAbsent)
}
