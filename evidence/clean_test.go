package evidence

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

func TestCheck_CleanPackagePasses(t *testing.T) {
	w := newWorld(t, handoff.JWS, nil)
	built, bind := w.build(refundPackage(), BuildOptions{})
	out := w.offer(built, bind)
	_, rep := w.receive(out, handoff.JSON, Delivered{Package: built.Encoded})
	for _, f := range rep.Findings() {
		t.Logf("%+v", f)
	}
	require.True(t, rep.Passed())
	require.Empty(t, rep.Findings())
	require.Equal(t, ref.Verified, rep.Binding().Outcome)
	_ = context.Background()
}
