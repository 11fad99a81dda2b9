package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/handofftest"
)

// verify refuses every bad input of the handofftest kit with the reason,
// and at the check, that the kit claims, in both signed forms and both
// encodings; a replay and an equivocation are caught across runs through
// --replay-db (section 5.1, HC-13..HC-61).
func TestVerify_BadInputsOfTheKit(t *testing.T) {
	const coder = handoff.AgentID("spiffe://b.example/agent/coder")
	w := handofftest.NewWorld(t, "spiffe://a.example/agent/planner", coder)
	dir := t.TempDir()
	trust := writeFile(t, filepath.Join(dir, "trust.json"), w.TrustDocument())
	var bads []handofftest.BadInput
	for _, ww := range []*handofftest.World{w, w.Encoded(handoff.JSON), w.Encoded(handoff.CBOR)} {
		bads = append(bads, ww.BadInputs(coder)...)
	}
	for i, bad := range bads {
		t.Run(bad.Name, func(t *testing.T) {
			args := []string{"--self", string(coder), "--trust", trust, "--now", strconv.Itoa(handofftest.StartUnix),
				"--dialog", bad.Host.Dialog, "--replay-db", filepath.Join(dir, fmt.Sprintf("replay-%d.db", i))}
			// The receiver configuration each refusal depends on
			// (BadInput.Configure), as flags.
			switch bad.Attack {
			case handofftest.AttackTruncatedChain:
				args = append(args, "--require-chain")
			case handofftest.AttackRefMismatch:
				o, _, err := handoff.InspectUnverified(bad.Offer, handoff.Limits{})
				require.NoError(t, err)
				obj := writeFile(t, filepath.Join(dir, fmt.Sprintf("object-%d", i)), []byte("another object"))
				args = append(args, "--ref-object", o.Refs[0].Loc+"="+obj)
			case handofftest.AttackUnverifiableRef:
				args = append(args, "--refs", "required")
			default:
				require.Nil(t, bad.Configure, "a configuration this test does not map to flags")
			}
			for j, p := range bad.Prior {
				m := verifyOut(t, 0, nil, append(args, writeFile(t, filepath.Join(dir, fmt.Sprintf("prior-%d-%d", i, j)), p))...)
				require.Equal(t, true, m["accepted"])
			}
			m := verifyOut(t, 1, nil, append(args, writeFile(t, filepath.Join(dir, fmt.Sprintf("bad-%d", i)), bad.Data))...)
			assert.Equal(t, string(bad.Reason), m["reason"], bad.Rule)
			assert.Equal(t, bad.Retransmission, m["retransmission"])
			if !bad.Retransmission {
				assert.Equal(t, int(bad.Check), slices.Index(checkResults(t, m), "fail")+1, "the check that decides")
			}
		})
	}
}
